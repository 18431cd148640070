"""Evaluation and the paper's analyses on top of es_grpo.py: the measurements, the claims and the
report writer are the package analyses/ (its docstring maps each claim to its code). Here: the
commands and their flags (reproduce's: analyses/reproduction/plan.py).

    python eval.py MODEL [MODEL ...] --out evals/         # Pass@K, Maj@K, greedy, entropy, held-out
    python eval.py drift BASE TRAINED [TRAINED ...] --out evals/drift  # relative L2 drift per kind
    python eval.py sparsity BASE TRAINED --out evals/sparsity  # zero |delta| <= tau: Pass@K kept
    python eval.py diversity MODEL --population 8 --sigma 1e-2  # JS_succ, JS_pol, coverage
    python eval.py forgetting BEFORE AFTER [AFTER ...]    # held-out task Pass@K deltas
    python eval.py curves RUN [RUN ...]                   # training curves from metrics.jsonl
    python eval.py sweep --populations 8,16,32 --sequences 51200  # ES populations, equal sequences
    python eval.py reproduce --out report [--quick]       # every experiment, REPORT.md, verdicts
    python eval.py verifier Math-Verify/tests             # the math reward on math-verify's cases
    python eval.py pilot --model MODEL --eval-split dev --out report/smollm2-add-gpu  # its POWER.md
    python eval.py trajectories RUN [RUN ...] --base BASE/pass_at_k.json  # stopped runs: claim 1

MODEL is a folder (e.g. runs/es-s0/stage1-es) or a hub id; "" or "tiny" is the shipped tiny model.
Evaluation uses es_grpo's held-out problems (the `test` split unless --eval-split dev), never
training ones. Each command writes JSON, a markdown table and a PNG to --out. `reproduce` scores
every part of every claim: report/REPORT.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import es_grpo
from analyses import figures
from analyses.diversity import Population, diversity_analysis
from analyses.evaluation import EVAL_FLAGS, evaluate_model, evaluation_args, load
from analyses.forgetting import forgetting_deltas
from analyses.paths import training_curves
from analyses.reproduction.claims import judge
from analyses.reproduction.evidence import gather
from analyses.reproduction.montecarlo import stability
from analyses.reproduction.pilot import power_plan
from analyses.reproduction.plan import (REPRODUCE_PARTS, Stopwatch, plan_of, planned_runs,
                                        reproduce_parser, train_schedules)
from analyses.reproduction.report import write_report
from analyses.reproduction.trajectories import write_trajectories
from analyses.training import REPORT_TO, SAVED_ONLY, population_sweep
from analyses.verifier_cases import check_cases
from analyses.weights import ZEROED, SparsityMasks, drift_analysis, sparsity_analysis
from scale.config import Args


def parser_for(command: str) -> argparse.ArgumentParser:
    """The evaluation flags of a run (scale/config.py's Args: names, defaults, help), plus the
    command's own."""
    parser = es_grpo.dataclass_parser(Args, f"eval.py {command}".strip(), __doc__, only=EVAL_FLAGS,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="evals",
                        help="folder for the JSON, markdown and PNG outputs")
    return parser


def eval_args(namespace) -> Args:
    args = evaluation_args(namespace)
    if args.eval_samples < 1 or args.eval_problems < 1:
        raise es_grpo.BadInput("eval.py: --eval-samples and --eval-problems must be at least 1")
    return args


def cmd_evaluate(argv):
    parser = parser_for("")
    parser.add_argument("models", nargs="+",
                        help="model folders or hub ids ('tiny': the shipped model)")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    results = {name: evaluate_model(*load(name, args), args) for name in namespace.models}
    figures.write_evaluation(Path(namespace.out), results, args)
    return results


def cmd_drift(argv):
    parser = parser_for("drift")
    parser.add_argument("base", help="the model before training")
    parser.add_argument("trained", nargs="+",
                        help="trained models (e.g. an ES and a GRPO checkpoint)")
    namespace = parser.parse_args(argv)
    data = drift_analysis(namespace.base, namespace.trained, eval_args(namespace))
    figures.write_drift(Path(namespace.out), data)
    return data


def cmd_sparsity(argv):
    parser = parser_for("sparsity")
    parser.add_argument("base", help="the model before training")
    parser.add_argument("trained", help="the trained model whose update is sparsified")
    parser.add_argument("--zeroed", default=",".join(map(str, ZEROED)),
                        help="comma-separated fractions of the update's coordinates to zero, "
                             "smallest |delta| first (the paper: about 0.78 keeps Pass@1)")
    parser.add_argument("--taus", default="",
                        help="comma-separated thresholds tau instead (zero |delta| <= tau)")
    parser.add_argument("--null", default="",
                        help="a null ES run's model (es_grpo.py --es-null): its update, "
                             "sparsified the same way, is the second control")
    namespace = parser.parse_args(argv)
    try:
        values = [float(t) for t in (namespace.taus or namespace.zeroed).split(",")]
    except ValueError:
        parser.error(f"--taus / --zeroed: not a list of numbers: "
                     f"{namespace.taus or namespace.zeroed!r}")
    masks = SparsityMasks(values, by_tau=bool(namespace.taus), null=namespace.null)
    data = sparsity_analysis(namespace.base, namespace.trained, masks, eval_args(namespace))
    figures.write_sparsity(Path(namespace.out), data)
    return data


def cmd_diversity(argv):
    parser = parser_for("diversity")
    parser.add_argument("model", help="the centre model")
    parser.add_argument("--population", type=int, default=8, help="ES population N")
    parser.add_argument("--sigma", type=float, default=Args.es_sigma, help="ES noise scale")
    parser.add_argument("--sigmas", default="",
                        help="comma-separated sigmas to sweep (overrides --sigma)")
    parser.add_argument("--samples", type=int, default=64,
                        help="samples per problem, member and centre (>= N)")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    if not 2 <= namespace.population <= namespace.samples:
        parser.error("--population must be at least 2 and --samples at least --population (the "
                     "centre's Pass@N)")
    sigmas = ([float(x) for x in namespace.sigmas.split(",")] if namespace.sigmas
              else [namespace.sigma])
    rows = diversity_analysis(namespace.model,
                              Population(namespace.population, sigmas, namespace.samples), args)
    figures.write_diversity(Path(namespace.out), namespace.model, rows)
    return rows


def cmd_forgetting(argv):
    parser = parser_for("forgetting")
    parser.add_argument("before", help="the model before training")
    parser.add_argument("after", nargs="+", help="trained models")
    namespace = parser.parse_args(argv)
    data = forgetting_deltas(namespace.before, namespace.after, eval_args(namespace))
    figures.write_forgetting(Path(namespace.out), data)
    return data["deltas"]


def cmd_curves(argv):
    parser = argparse.ArgumentParser(prog="eval.py curves",
                                     description="training curves of run folders")
    parser.add_argument("runs", nargs="+", help="run folders written by es_grpo.py")
    parser.add_argument("--out", default="evals", help="output folder")
    namespace = parser.parse_args(argv)
    curves = training_curves([Path(name) for name in namespace.runs])
    figures.write_curves(Path(namespace.out), curves)
    return curves["summary"]


def cmd_sweep(argv):
    parser = argparse.ArgumentParser(prog="eval.py sweep",
                                     description="ES population sizes at equal sequences")
    parser.add_argument("--populations", default="8,16,32",
                        help="comma-separated population sizes N")
    parser.add_argument("--sequences", type=int, default=32 * 64 * 25,
                        help="sequences each ES run may generate")
    parser.add_argument("--prompts", type=int, default=Args.es_prompts,
                        help="prompts per member and iteration")
    parser.add_argument("--out", default="evals", help="output folder (runs go to OUT/runs)")
    namespace, run_flags = parser.parse_known_args(argv)  # other flags go to es_grpo.py
    populations = [int(n) for n in namespace.populations.split(",")]
    rows = population_sweep(Path(namespace.out) / "runs", run_flags, populations,
                            namespace.sequences, namespace.prompts)
    figures.write_sweep(Path(namespace.out), rows, run_flags, namespace.sequences)
    return rows


def cmd_reproduce(argv):
    """Plan the runs, train them, gather the evidence, judge the claims, write the report."""
    parser = reproduce_parser()
    namespace, run_flags = parser.parse_known_args(argv)
    if set(namespace.parts.split(",")) - set(REPRODUCE_PARTS):
        parser.error(f"--parts {namespace.parts}: the parts are {', '.join(REPRODUCE_PARTS)}")
    plan = plan_of(namespace, run_flags, argv)
    # every claims run's flags, to launch with torchrun -m scale.train into OUT/runs
    if namespace.plan:
        print(*(" ".join([*run_argv, "--out", str(folder)])
                for folder, run_argv, _ in planned_runs(plan)), sep="\n")
        return []
    clock, saving = Stopwatch(), SAVED_ONLY.set(plan.saved_only)
    tracked = REPORT_TO.set(namespace.report_to)
    with clock("claims: the schedule runs"):
        train_schedules(plan)
    evidence = gather(plan, clock)
    write_report(evidence, claims := judge(evidence), stability(evidence, claims))
    SAVED_ONLY.reset(saving)
    REPORT_TO.reset(tracked)
    es_grpo.log(f"wrote {plan.out / 'REPORT.md'}")
    return claims


def cmd_pilot(argv):
    parser = parser_for("pilot")
    parser.description = ("the real model's power plan: the base model on dev problems "
                          "(analyses/reproduction/pilot.py)")
    parser.add_argument("--model", default="", help="model folder or hub id")
    parser.add_argument("--heldout", default="word", help="the held-out family")
    parser.add_argument("--quick", action="store_true",
                        help="updates of 2 x 2 rows (the suite's), not the plan's")
    namespace = parser.parse_args(argv)
    args = dataclasses.replace(eval_args(namespace), model=namespace.model)
    if args.eval_samples < 32:
        parser.error("--eval-samples: the plan reads Pass@32, so at least 32")
    return power_plan(args, namespace.heldout, Path(namespace.out), namespace.quick,
                      command=" ".join(["python eval.py pilot", *argv]))


def cmd_trajectories(argv):
    parser = argparse.ArgumentParser(prog="eval.py trajectories",
                                     description=write_trajectories.__doc__)
    parser.add_argument("runs", nargs="+",
                        help="run folders (report/smollm2-add-gpu/h200.sh's), stopped or finished")
    parser.add_argument("--base", required=True,
                        help="the base model's pass_at_k.json (eval.py MODEL, same settings)")
    parser.add_argument("--out", default="evals",
                        help="folder for REPORT.md, report.json and the figures")
    return write_trajectories(parser.parse_args(argv),
                              " ".join(["python eval.py trajectories", *argv]))


def cmd_verifier(argv):
    parser = argparse.ArgumentParser(prog="eval.py verifier", description=check_cases.__doc__)
    parser.add_argument("tests", help="the tests/ folder of a Math-Verify checkout")
    return check_cases(Path(parser.parse_args(argv).tests))


COMMANDS = {"reproduce": cmd_reproduce, "sweep": cmd_sweep, "drift": cmd_drift,
            "sparsity": cmd_sparsity, "diversity": cmd_diversity, "forgetting": cmd_forgetting,
            "curves": cmd_curves,
            "verifier": cmd_verifier, "pilot": cmd_pilot, "trajectories": cmd_trajectories}


def main(argv: list[str]):
    command = COMMANDS.get(argv[0] if argv else "")
    return command(argv[1:]) if command else cmd_evaluate(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
