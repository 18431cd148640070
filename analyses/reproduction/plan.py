"""What `eval.py reproduce` trains: the plan read from its flags, each schedule's runs and claim 1's
frontier, trained (or found finished) in OUT/runs, and the wall time of each part."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import time
from pathlib import Path

import es_grpo
from analyses.evaluation import evaluation_args
from analyses.training import PATH_POINTS, eval_every, keeps_settings, train_run
from scale.config import TRACKERS
from es_grpo import log
from scale.config import Args, parse_args

# tiny preset, tuned on dev: report/NOTES.md, "How the tiny preset was chosen"
CALIBRATED_GRPO = ["--grpo-lr", "3e-6"]
REPRODUCE_PARTS = ("claims", "es-grpo", "claim6", "paper-steps", "sizes", "untied")


def schedules(args: Args, steps: int) -> dict[str, int]:
    """Updates of each schedule. GRPO->ES and ES->GRPO split `steps` evenly (the paper's claim 3).
    ES alone gets as many sequences as GRPO->ES generates in all (matched compute). GRPO alone runs
    2 x steps, so that its path passes GRPO->ES's number of updates and, further on, higher Pass@1
    (on the tiny model, about GRPO->ES's seconds); matching its sequences to ES's would take about
    8x more GRPO updates, so compute is matched where the schedule that spent less ends, on the
    other's path."""
    (_, first), (_, second) = es_grpo.stages_of("grpo-es", steps)
    grpo_sequences, es_sequences = (args.grpo_prompts * args.grpo_group,
                                    args.es_population * args.es_prompts)
    return {"grpo": 2 * steps, "es": second + math.ceil(first * grpo_sequences / es_sequences),
            "grpo-es": steps, "es-grpo": steps}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `eval.py reproduce` trains and analyses, from its flags."""
    out: Path
    argv: list[str]  # the command's own, for the report
    quick: bool
    parts: set[str]
    seeds: list[int]
    samples: int  # per problem at each stage's end
    run_flags: list[str]  # the user's flags for every es_grpo.py run
    small: list[str]  # --quick's small budgets
    flags: list[str]  # every schedule run's es_grpo.py flags
    args: Args  # those flags parsed
    updates: dict[str, int]  # per schedule
    seeds_of: dict[str, list[int]]  # per schedule
    # claim 1's: per algo, rate -> updates (0: the schedule's own)
    frontier: dict[str, dict[float, int]]
    diversity_problems: int
    diversity_samples: int
    forgetting_problems: int  # per held-out family (claim 5)
    started: float
    # --saved-only: the report from saved runs and analyses, nothing trained or measured
    saved_only: bool = False

    @property
    def k(self) -> int:  # the large K of the verdicts
        return min(32, self.args.trajectory_samples)

    @property
    def runs(self) -> Path:
        return self.out / "runs"

    @property
    def analyses(self) -> Path:
        return self.out / "analyses"

    def models(self, algo: str) -> list[str]:  # each seed's trained model of a one-stage schedule
        return [str(self.runs / f"{algo}-s{seed}" / f"stage1-{algo}") for seed in self.seeds]

    @property
    # each seed's null ES run's (rewards shuffled across members)
    def null_models(self) -> list[str]:
        return [str(self.runs / f"es-null-s{seed}" / "stage1-es") for seed in self.seeds]

    @property
    def analysis_args(self) -> Args:  # the runs' evaluation settings, at most 64 samples
        return dataclasses.replace(evaluation_args(self.args), eval_samples=min(self.samples, 64))

    @property
    def base_model(self) -> str:
        return self.args.model or "tiny"

    @property
    def sweep_flags(self) -> list[str]:
        return [*self.small, *self.run_flags, "--eval-samples", str(min(self.samples, 64))]


def rates_of(text: str, flag: str) -> dict[float, int]:
    """`RATE[:UPDATES],...` as {rate: updates} (no UPDATES: 0, the schedule's own); "" is none."""
    rates = {}
    for item in filter(None, text.split(",")):
        rate, _, updates = item.partition(":")
        try:
            value, count = float(rate), int(updates or 0)
        except ValueError:
            value, count = math.nan, 0
        if not 0 < value < math.inf or count < 0:
            raise es_grpo.BadInput(f"{flag} {text}: not a list of RATE[:UPDATES], rates above 0 "
                                   f"({item!r})")
        rates[value] = count
    return rates


# --parts: what each part of REPRODUCE_PARTS trains
PARTS_HELP = ("comma-separated: claims (the runs of claims 1-5, claim 1's frontier and the "
              "analyses: always), es-grpo (the reverse schedule, ES then GRPO, seed 0; in no "
              "verdict), claim6 (ES with raw rewards, alpha chosen on dev, and with antithetic "
              "sampling, each seed), paper-steps (GRPO at the learning rate that gives the paper's "
              "per-step ES/GRPO ratio, each seed), sizes (two more model sizes pretrained like the "
              "shipped one, each with the population sweep), untied (the shipped model pretrained "
              "again with its own LM head, then trained by ES and GRPO, seed 0: drift per module "
              "kind). A part not asked for is still reported if OUT holds its runs; "
              "report/NOTES.md gives each part's minutes. Default: claims,claim6 (every verdict's "
              "runs). --plan lists the claims runs only")


def reproduce_parser() -> argparse.ArgumentParser:
    """eval.py reproduce's flags, which plan_of reads; any other flag goes to every run."""
    parser = argparse.ArgumentParser(
        prog="eval.py reproduce",
        description="the paper's experiment set, REPORT.md with a verdict per claim",
        epilog="Any other flag goes to every es_grpo.py run (e.g. --preset paper --model "
               "Qwen/Qwen2.5-1.5B-Instruct --data train.jsonl --eval-data test.jsonl --device "
               "cuda). Finished runs with the same settings in OUT/runs are reused, interrupted "
               "ones resumed.")
    parser.add_argument("--out", default="report", help="report folder (runs, analyses, REPORT.md)")
    parser.add_argument("--quick", action="store_true",
                        help="one seed and tiny budgets (the test suite's)")
    parser.add_argument("--seeds", default="",
                        help="comma-separated seeds (default 0,1,2,3,4; --quick: 0)")
    parser.add_argument("--steps", type=int, default=0,
                        help="updates of the two-stage schedules; the others follow (default 100; "
                             "--quick: 4)")
    parser.add_argument("--samples", type=int, default=0,
                        help="samples per problem at each stage's end: Pass@K curves up to K = "
                             "samples (default 64; --quick: 16)")
    parser.add_argument("--diversity-problems", type=int, default=100,
                        help="problems of the claim-2 measurement")
    parser.add_argument("--diversity-samples", type=int, default=32,
                        help="samples a problem, member and centre (>= N)")
    parser.add_argument("--forgetting-problems", type=int, default=200,
                        help="claim 5's held-out problems a family")
    parser.add_argument("--parts", default="claims,claim6", help=PARTS_HELP)
    parser.add_argument("--frontier-lrs", default=FRONTIER_LRS,
                        help="claim 1's frontier: GRPO's other learning rates, comma-separated "
                             "RATE[:UPDATES] (UPDATES: GRPO's own if not given, and with --quick)")
    parser.add_argument("--frontier-alphas", default=FRONTIER_ALPHAS,
                        help="ES's other alphas, the same way ('': none)")
    parser.add_argument("--plan", action="store_true",
                        help="print each run's flags and exit: to launch them with torchrun -m "
                             "scale.train into OUT/runs, where this command then finds and reuses "
                             "them")
    parser.add_argument("--report-to", default="none", choices=TRACKERS,
                        help="the tracker each run it trains, or trains again in full, logs to "
                             "(as scale.train's flag; a run replayed from its rewards: none)")
    parser.add_argument("--saved-only", action="store_true",
                        help="REPORT.md from the runs and analyses saved in OUT, nothing trained "
                             "or measured: a run or an analysis not saved as the code makes it: "
                             "exit 2")
    return parser


def plan_of(namespace, run_flags: list[str], argv: list[str]) -> Plan:
    """The plan of `eval.py reproduce ARGV` from its parsed flags (reproduce_parser) and
    the flags it passes to every es_grpo.py run."""
    quick = namespace.quick
    seeds = [int(s) for s in (namespace.seeds or ("0" if quick else "0,1,2,3,4")).split(",")]
    samples = namespace.samples or (16 if quick else 64)
    small = ["--eval-problems", "4", "--heldout-problems", "2", "--es-population", "4",
             "--es-prompts", "4", "--grpo-prompts", "4"] if quick else []
    # every evaluation that decides a verdict reads all 500 built-in test problems; claim 5 is
    # measured by
    # forgetting_control, not the runs' own held-out sets
    heldout = [] if quick else ["--eval-problems", str(es_grpo.EVAL_POOL), "--heldout-problems",
                                "20"]
    flags = [*small, *heldout, *run_flags, "--eval-samples", str(samples),
             "--trajectory-samples", "8" if quick else "32"]
    args = parse_args(flags)  # a bad flag stops here, before any run
    if args.preset == "tiny" and not any(flag.startswith("--grpo-lr") for flag in run_flags):
        flags, args = [*CALIBRATED_GRPO, *flags], parse_args([*CALIBRATED_GRPO, *flags])
    updates = schedules(args, namespace.steps or (4 if quick else 100))
    parts = set(namespace.parts.split(","))
    if "es-grpo" not in parts:  # ES->GRPO enters no verdict
        del updates["es-grpo"]
    # ES->GRPO: seed 0 only
    seeds_of = {name: seeds[:1] if name == "es-grpo" else seeds for name in updates}
    frontier = {"grpo": rates_of(namespace.frontier_lrs, "--frontier-lrs"),
                "es": rates_of(namespace.frontier_alphas, "--frontier-alphas")}
    # a way of making it, not the report's design
    argv = [word for word in argv if word != "--saved-only"]
    return Plan(out=Path(namespace.out), argv=argv, quick=quick, parts=parts, seeds=seeds,
                samples=samples,
                run_flags=run_flags, small=small, flags=flags, args=args, updates=updates,
                seeds_of=seeds_of,
                frontier=frontier, diversity_problems=namespace.diversity_problems,
                diversity_samples=namespace.diversity_samples,
                forgetting_problems=namespace.forgetting_problems, started=time.time(),
                saved_only=namespace.saved_only)


class Stopwatch:
    """The wall time of each part of this invocation (a reused run or analysis costs nothing)."""

    def __init__(self):
        self.minutes: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str):
        tick = time.time()
        try:
            yield
        finally:
            self.minutes[part] = self.minutes.get(part, 0.0) + (time.time() - tick) / 60


# Claim 1's frontier (the default of --frontier-lrs and --frontier-alphas, chosen for the tiny
# preset): GRPO at
# more learning rates, spanning 1e-6 to 5e-5 with the calibrated 3e-6, each with updates enough for
# its path to pass
# ES's Pass@1 on dev, and FRONTIER_POINTS trajectory points; ES at twice the calibrated alpha (more
# Pass@1 per
# update). Each rate: the first FRONTIER_SEEDS seeds, enough to detect effects near the paper's
# (report/NOTES.md,
# "The reproduction: design and verdict rules"). Chosen for their span, on no evaluation result; the
# calibrated
# rates were chosen on `dev` (report/NOTES.md, "How the tiny preset was chosen"). Another model
# takes its own by
# flags (report/smollm2-add-gpu/h200.sh).
# RATE:UPDATES (none: the schedule's own)
FRONTIER_LRS, FRONTIER_ALPHAS = "1e-6:200,1e-5:80,5e-5:30", "4e-3"
FRONTIER_SEEDS, FRONTIER_POINTS = 5, 8


def frontier_runs(plan: Plan):
    """(name, folder, es_grpo.py flags) of each frontier run (--quick: seed 0, the quick
    budgets)."""
    for algo, rates in plan.frontier.items():
        for rate, updates in rates.items():
            count = plan.updates[algo] if plan.quick or not updates else updates
            name = f"{algo}-{'lr' if algo == 'grpo' else 'alpha'}{rate:g}"
            for seed in plan.seeds[:1 if plan.quick else FRONTIER_SEEDS]:
                every = eval_every(count, 2 if plan.quick else FRONTIER_POINTS)
                yield name, plan.runs / f"{name}-s{seed}", [
                    *plan.flags, "--algo", algo, f"--{algo}-{'lr' if algo == 'grpo' else 'alpha'}",
                    f"{rate:g}", "--steps", str(count), "--seed", str(seed), "--eval-every", every]


def schedule_runs(plan: Plan):
    """(folder, es_grpo.py flags) of each schedule's run, seed by seed, PATH_POINTS trajectory
    evaluations each (--quick: 2). GRPO's path holds the points claims 1 and 3 match on; the others'
    are for the plots."""
    for seed in plan.seeds:
        for name, count in plan.updates.items():
            if seed in plan.seeds_of[name]:
                yield plan.runs / f"{name}-s{seed}", [*plan.flags, "--algo", name, "--steps",
                                                      str(count), "--seed",
                                                      str(seed), "--eval-every",
                                                      path_every(plan, name, count)]


def path_every(plan: Plan, name: str, count: int) -> str:  # a schedule's: PATH_POINTS (--quick: 2)
    return eval_every(count, 2 if plan.quick else PATH_POINTS[name])


def null_runs(plan: Plan):
    """(folder, es_grpo.py flags) of each seed's null ES run (rewards shuffled across members),
    claim 4's control (its null comparison is a difference over seeds, as its ES comparison is); its
    path points are ES's."""
    count = plan.updates["es"]
    for seed, model in zip(plan.seeds, plan.null_models):
        yield Path(model).parent, [*plan.flags, "--algo", "es", "--steps", str(count), "--seed",
                                   str(seed),
                                   "--es-null", "--eval-every", path_every(plan, "es", count)]


def planned_runs(plan: Plan):
    """(folder, es_grpo.py flags, why) of every claims run: the schedules', claim 1's frontier, the
    nulls."""
    for folder, run_argv in schedule_runs(plan):
        yield folder, run_argv, f"{run_argv[run_argv.index('--steps') + 1]} updates"
    for _, folder, run_argv in frontier_runs(plan):
        yield folder, run_argv, "claim 1's frontier"
    for folder, run_argv in null_runs(plan):
        yield folder, run_argv, "the null ES run (rewards shuffled across members)"


def train_schedules(plan: Plan):
    """Every claims run, trained or found finished in OUT/runs; every run in OUT/runs checked
    against its settings before any is trained (training.keeps_settings). A seed's first run lends
    its base model's evaluation to the seed's later ones: their evaluation settings are the same, so
    is their base."""
    for folder, run_argv, _ in planned_runs(plan):
        keeps_settings(folder, parse_args([*run_argv, "--out", str(folder)]))
    lenders = {}  # seed -> its first run
    for folder, run_argv, why in planned_runs(plan):
        log(f"reproduce: {folder.name}, {why}")
        seed = folder.name.rsplit("-s", 1)[1]
        train_run(folder, run_argv, base_from=lenders.get(seed))
        lenders.setdefault(seed, folder)
