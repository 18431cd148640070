"""Training runs for the analyses: one es_grpo.py run in this process (reused when finished, resumed
when interrupted), trained again from its own settings, and the sweeps built from runs (ES
populations at equal sequences, model sizes, claim 6's reward and sampling arms, GRPO to ES's
Pass@1)."""
from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import shutil
import warnings
from pathlib import Path

import torch

import es_grpo
from analyses.evaluation import final, load
from es_grpo import BadInput, log
from scale.assembly import hooks  # a run's hooks, as python -m scale.train builds them
from scale.config import LAUNCH, MACHINERY, Args, evaluation_sets, parse_args, settings_from
from scale.runs import ResumableFolder  # CheckedFolder is a run folder that checks what it is given


# reproduce --saved-only: train nothing
SAVED_ONLY = contextvars.ContextVar("saved_only", default=False)
REPORT_TO = contextvars.ContextVar("report_to", default="none")  # reproduce --report-to's tracker


def train_run(out: Path, argv: list[str], base_from: Path | None = None) -> dict:
    """One es_grpo.py run in this process; returns its summary. A finished run in `out` made with
    the same settings is reused and an interrupted one resumed, so a long reproduction survives a
    crash, and runs made with torchrun -m scale.train into the same folders count too; a run with
    other settings in `out` is refused (keeps_settings), and so is a folder that holds no run.
    base_from: a finished run whose base evaluation a new run takes (scale.train --base-from:
    refused if an evaluation setting differs)."""
    args = parse_args([*argv, "--out", str(out)])
    same = keeps_settings(out, args)
    if same and (out / "summary.json").exists():
        log(f"reproduce: {out} is done with these settings: reused")
        return json.loads((out / "summary.json").read_text())
    if SAVED_ONLY.get():
        raise BadInput(f"{out}: no finished run with these settings, and --saved-only trains "
                       f"nothing")
    args = dataclasses.replace(args, report_to=REPORT_TO.get())
    if same and (out / "checkpoint.pt").exists():
        resumed = dataclasses.replace(args, resume=str(out))
        return es_grpo.run(resumed, **hooks(resumed))
    lent = str(base_from) if base_from and (base_from / "summary.json").exists() else ""
    args = dataclasses.replace(args, overwrite=True, base_from=lent)
    return es_grpo.run(args, **hooks(args))


def keeps_settings(folder: Path, args: Args) -> bool:
    """Whether `folder` holds a run made with these settings; False if it holds none; BadInput, one
    line naming the first setting that differs, if it holds a run made with others: hours of
    training are not replaced because a flag was forgotten (remove the folder to train it again)."""
    changed = setting_changed(folder, args)
    if changed:
        raise BadInput(f"{folder}: a run made with {changed}; give its settings, or remove it to "
                       f"train it again")
    return changed == ""


def setting_changed(folder: Path, args: Args) -> str | None:
    """How the run in `folder` differs from these settings (its config.json; a newer flag: its
    default): "" not at all, else its first other setting, named with the run's value and this one;
    None: no readable run."""
    try:
        saved = settings_from(json.loads((folder / "config.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    for field in dataclasses.fields(Args):
        theirs, mine = getattr(saved, field.name), getattr(args, field.name)
        if field.name not in (*LAUNCH, *MACHINERY) and theirs != mine:
            return f"--{field.name.replace('_', '-')} {theirs!r} (this one: {mine!r})"
    return ""


def run_settings(folder: Path) -> Args:
    """The settings a finished run was trained with, from its config.json (its `out`: this
    folder)."""
    settings = settings_from(json.loads((folder / "config.json").read_text()))
    return dataclasses.replace(settings, out=str(folder), overwrite=True)


def run_results(folder: Path) -> list[dict]:
    """A finished run's evaluations, stage by stage, less their timings: what tells one training
    from another."""
    stages = json.loads((folder / "summary.json").read_text())["stages"]
    return [{key: value for key, value in stage.items() if key != "seconds"} for stage in stages]


NOT_TRAINING = ("seconds", "seq_per_s", "eval")  # a metrics line's timings and trajectory point
# what a training's decisions are made from: these must repeat exactly; a metrics line's other
# numbers (entropy, loss, KL, clip fractions) are read off the forward pass and repeat to rounding
# on another CPU
DECIDING = ("update", "stage", "reward", "reward_std", "reward_max", "sequences", "tokens",
            "member_rewards", "zero_std_frac")
# relative: a float32 forward pass's rounding, grown by the differences of log-probs that KL and the
# loss are made of; far below what another training would change, whose rewards would differ
ROUNDING = 1e-4
# what a replay remakes of a metrics line (it decodes nothing: no tokens, entropy or disagreement)
REPLAYED = ("update", "stage", "reward", "reward_std", "reward_max", "sequences", "member_rewards")


def weights_again(folder: Path) -> bool:
    """A finished run's weights, not kept, made again without its evaluations, which take most of a
    run's time, in FOLDER/again, its stage models then moved into FOLDER. An ES run whose
    metrics.jsonl keeps its members' rewards is replayed (RecordedRewards: nothing decoded, so no
    machine's rounding of the model enters, only torch's seeded noise). Any other run is trained
    again with no evaluation problems and no trajectory points, each update's training metrics
    compared with the run's own as it is made (CheckedFolder): the same rewards at every update and
    the forward pass's numbers to rounding (same_training), so the same weights after the last, to
    rounding; an ES run so made keeps its members' rewards from then on (keep_member_rewards). False
    at the first difference, nothing moved: train_again then trains and evaluates the run in full.
    Resumed if stopped midway."""
    again, lines = folder / "again", training_lines(folder)
    settings = dataclasses.replace(run_settings(folder), out=str(again), eval_every=0)
    resume = setting_changed(again, settings) == "" and (again / "checkpoint.pt").exists()
    if not resume:
        shutil.rmtree(again, ignore_errors=True)
    replay = all(line["stage"] == "es" and "member_rewards" in line for line in lines)
    log(f"reproduce: {folder}'s weights are not here (not committed): "
        + (f"its ES updates replayed from their rewards in {again}" if replay else
           f"training it again, unevaluated, in {again}"))
    given = hooks(settings) | {"problems": training_problems} | (
        {"score_members": RecordedRewards(lines)} if replay else {})
    checked = CheckedFolder([{key: line[key] for key in REPLAYED} if replay else line
                             for line in lines], resume=str(again) if resume else "")
    try:
        with warnings.catch_warnings():  # an evaluation of no problems: NaN, said once a stage
            warnings.simplefilter("ignore", RuntimeWarning)
            es_grpo.run(settings, **given | {"folder": checked})
    except TrainedOtherwise as difference:
        log(f"reproduce: {folder} trained again: {difference}; trained again in full")
        shutil.rmtree(again)
        return False
    for stage in again.glob("stage*-*"):
        shutil.rmtree(folder / stage.name, ignore_errors=True)
        stage.rename(folder / stage.name)
    if not replay and all(line["stage"] == "es" for line in lines):
        keep_member_rewards(folder, training_lines(again))
    shutil.rmtree(again)
    log(f"reproduce: {folder} trained again: every update's training metrics the same, so the same "
        f"weights")
    return True


def keep_member_rewards(folder: Path, made: list[dict]):
    """An ES run whose metrics.jsonl predates its members' rewards, trained again the same
    (weights_again): each line gains its update's members' rewards, as made again, and nothing else
    changes; the next time its weights are needed, they are replayed from them."""
    rewards = {line["update"]: line["member_rewards"] for line in made}
    lines = []
    for text in (folder / "metrics.jsonl").read_text().splitlines():
        line, kept = json.loads(text), {}
        for key, value in line.items():
            kept[key] = value
            if key == "sequences" and "member_rewards" not in line:  # where es_step puts them
                kept["member_rewards"] = rewards[line["update"]]
        lines.append(json.dumps(kept) + "\n")
    (folder / "metrics.jsonl").write_text("".join(lines))


def training_problems(args: Args, tokenizer):  # a run's training problems, and nothing to evaluate
    return evaluation_sets(args, tokenizer)[0], [], {}


class RecordedRewards:
    """es_step's score_members hook for a replay: each update's members' rewards as its metrics line
    recorded them (nothing decoded, no tokens). With the members' noise seeds, drawn again from the
    run's seed, they are the update (Salimans et al. 2017: ES workers exchange only scalars)."""

    def __init__(self, lines: list[dict]):
        self.rewards = {line["update"]: line["member_rewards"] for line in lines}

    def __call__(self, run, state, problems: list[dict], seeds: list[int],
                 seed: int) -> tuple[dict, dict]:
        update = seed - run.args.seed * 1_000_003 + 1  # train_stage's seed of an update
        scores = es_grpo.new_scores(len(seeds), len(problems))
        scores["reward"] = torch.tensor(self.rewards[update], dtype=torch.float64)  # (N,)
        return scores, {}


class TrainedOtherwise(Exception):
    pass


class CheckedFolder(ResumableFolder):
    """A run folder that compares each update's training metrics, once written, with `expected` (a
    run's own, training_lines, each with the keys to compare) and stops the run at the first that
    differs (TrainedOtherwise)."""

    def __init__(self, expected: list[dict], **options):
        super().__init__(**options)
        self.expected = expected

    def after_update(self, run, stage, results: list):
        number = stage.offset + stage.done
        wanted = self.expected[number - 1] if number <= len(self.expected) else {}
        made = training_lines(Path(run.args.out))[-1]
        key = next((key for key in wanted if not same_training(key, made.get(key), wanted[key])),
                   None) if wanted else "update"
        if key:
            raise TrainedOtherwise(f"update {number}'s {key} is {made.get(key)!r}, the run's "
                                   f"{wanted.get(key)!r}")
        super().after_update(run, stage, results)


def same_training(key: str, made, wanted) -> bool:
    """Whether a metrics value repeats the run's: exactly for what the training's decisions are made
    from (DECIDING), to rounding for a number read off the forward pass (another CPU's kernels round
    otherwise)."""
    if key in DECIDING or not all(isinstance(value, float) for value in (made, wanted)):
        return made == wanted
    # abs: a value near 0
    return math.isclose(made, wanted, rel_tol=ROUNDING, abs_tol=ROUNDING * 1e-3)


def training_lines(folder: Path) -> list[dict]:
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()
             if line.strip()]
    return [{key: value for key, value in line.items() if key not in NOT_TRAINING}
            for line in lines]


def train_again(folder: Path) -> bool:
    """A finished run whose weights are not kept (a report's committed runs keep only their
    settings, metrics and summary) trained again in place from its own settings. ES and GRPO are
    bit-exact for the same settings, seed and machine, so the same weights come back: a line says
    whether the evaluations are the same, and so does what it returns."""
    log(f"reproduce: {folder}'s weights are not here (not committed): training it again from its "
        f"config.json")
    before = run_results(folder)
    settings = run_settings(folder)
    settings = dataclasses.replace(settings, report_to=REPORT_TO.get())
    es_grpo.run(settings, **hooks(settings))
    same = run_results(folder) == before
    log(f"reproduce: {folder} trained again: "
        + ("the same evaluations, so the same weights" if same else
           "other evaluations than before (another machine or library?): what reads it is measured "
           "again"))
    return same


def population_sweep(out: Path, argv: list[str], populations: list[int], sequences: int,
                     prompts: int) -> dict:
    """ES with several population sizes N at (about) the same total number of generated sequences,
    alpha scaled with N so that every update moves each coordinate by the same random-walk amount:
    the update's per-coordinate noise is about alpha sqrt(N - 1) / N (no signal), so alpha_N = alpha
    N / sqrt(N - 1) times sqrt(N0 - 1) / N0 for the runs' own N0 and alpha. Without it, smaller N
    would also mean larger steps."""
    args = parse_args(argv)
    rows, samples, reference = ({}, args.eval_samples,
                                args.es_population / math.sqrt(args.es_population - 1))
    for population in populations:
        steps = max(1, sequences // (population * prompts))
        alpha = args.es_alpha * population / math.sqrt(population - 1) / reference
        summary = train_run(out / f"sweep-N{population}",
                            [*argv, "--algo", "es", "--es-population", str(population),
                             "--es-prompts", str(prompts), "--steps", str(steps),
                             "--es-alpha", f"{alpha:.6g}"])
        rows[f"N={population}"] = {"population": population, "alpha": float(f"{alpha:.6g}"),
                                   "updates": steps, "sequences": final(summary)["sequences"],
                                   **{k: final(summary)[k] for k in ("pass@1", "pass@16", "pass@64")
                                      if k in final(summary)},
                                   "samples": samples, "correct": final(summary)["correct"]}
    return rows


def grpo_at_gain(out: Path, flags: list[str], seeds: list[int], reach: float) -> dict:
    """GRPO trained again, each seed, for the updates at which its mean path reaches ES's mean
    Pass@1 (`reach`: the path's sequences there, NaN if it never does): the drift comparison that
    means something holds the gain fixed (per step, ES and GRPO drift as their step sizes do). The
    base model's evaluation is taken from the seed's GRPO run where it is finished: the same
    settings measure the same base. Such a run trained for other updates (ES's Pass@1, or GRPO's
    path, has changed since: runs trained again elsewhere) is replaced. {"updates": 0 if
    unreachable, "models": stage folders, "finals": rows}"""
    args = parse_args(flags)
    updates = (math.ceil(reach / (args.grpo_prompts * args.grpo_group)) if math.isfinite(reach)
               else 0)
    finals, models = [], []
    for seed in seeds if updates else []:
        log(f"reproduce: GRPO for {updates} updates, where its path reaches ES's Pass@1, seed "
            f"{seed}")
        folder = out / f"grpo-matched-s{seed}"
        argv = [*flags, "--algo", "grpo", "--steps", str(updates), "--seed", str(seed)]
        if only_steps_differ(folder, parse_args([*argv, "--out", str(folder)])):
            log(f"reproduce: {folder} reached ES's Pass@1 of before: replaced")
            shutil.rmtree(folder)
        finals.append(final(train_run(folder, argv, base_from=out / f"grpo-s{seed}")))
        models.append(str(folder / "stage1-grpo"))
    return {"updates": updates, "models": models, "finals": finals}


def only_steps_differ(folder: Path, args: Args) -> bool:
    """Whether the run in `folder` was made with these settings but for --steps (every other setting
    the same)."""
    changed = setting_changed(folder, args)
    return bool(changed) and setting_changed(
        folder, dataclasses.replace(args, steps=run_settings(folder).steps)) == ""


# raw rewards' alpha: the z-scored one times these (spread ~0.04 against ~1)
RAW_ALPHA_SCALES = (8, 25, 80, 250)


# trajectory evaluations of each schedule
PATH_POINTS = {"grpo": 4, "es": 3, "grpo-es": 3, "es-grpo": 3}


def eval_every(updates: int, points: int) -> str:
    """--eval-every for about `points` trajectory evaluations along `updates` updates."""
    return str(max(1, math.ceil(updates / points)))


def hyperparameter_arms(out: Path, flags: list[str], seeds: list[int], updates: int,
                        tune_updates: int, scales=RAW_ALPHA_SCALES) -> dict:
    """Claim 6's z-scoring and antithetic parts, at one model size and the ES runs' settings
    (`flags`): ES with raw centred rewards (--no-es-zscore) at an alpha chosen on the dev split (a
    run of tune_updates per candidate, the best dev Pass@1), and ES with antithetic sampling at the
    z-scored runs' alpha, each seed for `updates` updates. The z-scored arm is the report's ES runs
    themselves. {arm: [each seed's final row]}, the chosen raw alpha, and the dev Pass@1 of each
    candidate."""
    alpha, tuning = parse_args(flags).es_alpha, {}
    # dev: the built-in dev split, or with --data the file's last problems (held out from training),
    # never --eval-data
    dev = [flag for i, flag in enumerate(flags)
           if not (flag.startswith("--eval-data") or (i > 0 and flags[i - 1] == "--eval-data"))]
    for scale in scales:
        candidate = f"{alpha * scale:g}"
        summary = train_run(out / f"tune-raw-alpha{candidate}",
                            [*dev, "--algo", "es", "--no-es-zscore", "--es-alpha", candidate,
                             "--steps", str(tune_updates), "--seed", str(seeds[0]),
                             "--eval-split", "dev"])
        tuning[candidate] = final(summary)["pass@1"]
    raw_alpha = max(tuning, key=tuning.get)
    # the raw arm's path has ES's points: claim 6 compares them at matched Pass@1, as claim 1 does
    every = eval_every(updates, PATH_POINTS["es"])
    arms = {"raw": ["--no-es-zscore", "--es-alpha", raw_alpha, "--eval-every", every],
            "antithetic": ["--es-antithetic"]}
    rows = {arm: [final(train_run(out / f"es-{arm}-s{seed}",
                                  [*flags, "--algo", "es", *extra, "--steps", str(updates),
                                   "--seed", str(seed)])) for seed in seeds]
            for arm, extra in arms.items()}
    return {"rows": rows, "raw_alpha": float(raw_alpha), "tuning": tuning, "updates": updates,
            "tuned_on_seed": seeds[0]}


# claim 6's third part: the shipped model (0.86M parameters), one of 0.11M and one of 2.9M
MODEL_SIZES = {
    "smaller": ["--hidden-size", "64", "--intermediate-size", "192", "--layers", "2", "--heads",
                "2"],
    "shipped": [],
    # a third of the shipped recipe's lr: at its lr this one pretrained worse than the shipped model
    # (NOTES)
    "larger": ["--hidden-size", "192", "--intermediate-size", "576", "--layers", "6", "--heads",
               "6", "--lr", "1e-3"]}


def pretrained(model: Path, flags: list[str], what: str, runs: list[Path]):
    """tiny_model/pretrain.py FLAGS into `model`, unless its pretrain.json records those very
    settings (a model built with other flags, by an older recipe, is built again, and the `runs`
    trained from it are removed: train_run knows a model by its path only)."""
    from tiny_model.pretrain import PretrainArgs, main as pretrain
    wanted = dataclasses.asdict(PretrainArgs(**vars(
        es_grpo.dataclass_parser(PretrainArgs, "").parse_args(flags))))
    try:
        record = json.loads((model / "pretrain.json").read_text())
    except (OSError, ValueError):
        record = {}
    if any(record.get(name) != value for name, value in wanted.items() if name != "out"):
        log(f"reproduce: pretraining {what}")
        for folder in runs:
            shutil.rmtree(folder, ignore_errors=True)
        pretrain([*flags, "--out", str(model)])


def size_sweeps(out: Path, argv: list[str], populations: list[int], sequences: int, prompts: int,
                shipped: dict, pretrain_flags: list[str]) -> dict:
    """The population sweep on models of several sizes: the shipped model's (`shipped`,
    population_sweep's rows) and others pretrained here as it was (tiny_model/pretrain.py with the
    flags of MODEL_SIZES and pretrain_flags; kept in OUT/models). {size: {"parameters": count,
    "pretrain_loss": its final loss, "rows": the sweep's rows}}."""
    result = {}
    for size, shape in MODEL_SIZES.items():
        model = str(out / "models" / size) if shape else str(es_grpo.TINY_MODEL)
        if shape:
            pretrained(Path(model), [*shape, *pretrain_flags],
                       f"the {size} model ({' '.join(shape)})", [out / "runs" / f"size-{size}"])
        rows = shipped if not shape else population_sweep(
            out / "runs" / f"size-{size}", [*argv, "--model", model],
            populations, sequences, prompts)
        count = sum(p.numel() for p in load(model, parse_args(argv))[0].parameters())
        # a larger model is not always better
        record = json.loads((Path(model) / "pretrain.json").read_text())
        result[size] = {"parameters": count, "pretrain_loss": record.get("final_loss"),
                        "rows": rows}
    return result
