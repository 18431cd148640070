"""Everything the report shows, measured once: the runs read as paths, the matched comparisons, and
the analyses of claims 1-6 (each reused when OUT holds it with the same key: reuse.py), gathered
into one Evidence built by keyword and never changed after. No plots here: the report writer draws
them."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from analyses.diversity import Population, diversity_analysis
from analyses.forgetting import forgetting_control
from analyses.paths import comparisons, load_runs, pass_at_k_curves, training_curves
from analyses.reproduction.plan import Plan, Stopwatch, frontier_runs
from analyses.reproduction.reuse import Store
from analyses.statistics import Interval, interval
from analyses.training import (RAW_ALPHA_SCALES, grpo_at_gain, hyperparameter_arms,
                               population_sweep, pretrained, size_sweeps, train_run)
from analyses.weights import (PAPER_SPARSITY, SparsityMasks, drift_analysis, drift_table, drifts,
                              sparse_over_seeds, sparsity_analysis)
from es_grpo import log

SPARSITY_SAMPLES = 16  # per problem for claim 4's sparsified models: it reads Pass@1 only
# ES's per-coordinate step over GRPO's lr, paper: ~43.5
PAPER_STEP_RATIO = 2.5e-4 * math.sqrt(31) / 32 / 1e-6
RUN_PARTS = {"claims: the schedule runs": ("grpo-s", "es-s", "grpo-es-s", "es-grpo-s", "grpo-lr",
                                           "es-alpha"),
             "claims: the null and matched runs": ("es-null-", "grpo-matched-"),
             "claim6": ("es-raw-", "es-antithetic-", "tune-raw-"),
             "paper-steps": ("grpo-paper-steps-",),
             "sizes": ("sweep-", "size-"), "untied": ("untied-",)}  # run folder names of each part


@dataclasses.dataclass(frozen=True)
class Evidence:
    """Everything the report shows; the claims (claims.py) read their values from it."""
    plan: Plan
    runs: dict  # per schedule: load_runs
    rows: dict  # the matched comparisons
    curves: dict  # Pass@K curves
    training_curves: dict  # seed 0's runs' metrics: paths.training_curves
    drift: dict  # seed 0's ES, GRPO and null ES models: drift_table
    drift_ratio: Interval  # ES's total drift over GRPO's, over seeds
    module_kinds: dict  # claim 4: every seed's drift per module kind, {"es": [...], "grpo": [...]}
    sparsity: dict
    sparse_seeds: dict  # claim 4 on every ES and null seed: sparse_over_seeds
    forgetting: dict
    diversity: dict  # a row per sigma
    matched: dict  # GRPO trained to ES's Pass@1 gain: grpo_at_gain
    drift_ratio_matched: Interval | None  # ES's drift over the matched GRPO models', over seeds
    frontier: dict  # claim 1: the other rates' runs, load_runs
    minutes: dict  # wall time of each part in this invocation
    # wall time of each part's runs, whenever they were trained: runs_wall_minutes
    run_minutes: dict
    reused: dict  # analysis -> when the result the report reads was measured
    # claim 6: ES populations at equal sequences, the shipped model (part sizes)
    sweep: dict | None = None
    arms: dict | None = None  # claim 6: raw rewards and antithetic sampling
    sizes: dict | None = None  # claim 6: populations against model size
    untied: dict | None = None  # claim 4: module kinds with an untied LM head
    paper_steps: dict | None = None  # claim 4's control: GRPO at the paper's per-step ratio


def gather(plan: Plan, clock: Stopwatch) -> Evidence:
    """The analyses of claims 1-5 and the extra parts (--parts), each analysis reused when it can
    be. A run trained again for its weights that evaluates otherwise than its summary said (another
    machine, or evaluations that keep more) was read before that: gathered again, reading it as it
    is now (every analysis then reused)."""
    store = Store(plan.analyses / "reused", saved_only=plan.saved_only)
    with clock("claims: the analyses"):
        runs = load_runs(plan.runs, plan.seeds_of, plan.k)
        rows = comparisons(runs, plan.k)
        matched = grpo_at_gain(plan.runs, plan.flags, plan.seeds,
                               rows["ES vs GRPO, at ES's Pass@1"]["where"])
        measured = {"runs": runs, "rows": rows, "matched": matched,
                    "curves": pass_at_k_curves(runs),
                    "frontier": load_runs(plan.runs, frontier_seeds(plan), plan.k),
                    "training_curves": training_curves(
                        [plan.runs / f"{name}-s{plan.seeds[0]}" for name in plan.updates]),
                    **weight_analyses(plan, store, matched["models"]), **evaluations(plan, store)}
    extra = extra_parts(plan, store, clock)
    if store.evaluated_otherwise:
        log(f"reproduce: {len(store.evaluated_otherwise)} run(s) trained again evaluate otherwise: "
            f"gathered again")
        return gather(plan, clock)
    return Evidence(plan=plan, **measured, **extra, minutes=dict(clock.minutes),
                    reused=dict(store.made),
                    run_minutes=runs_wall_minutes(plan.runs, plan.analyses / "run-minutes.json"))


def runs_wall_minutes(runs: Path, record: Path | None = None) -> dict[str, dict]:
    """Per part, its finished runs under OUT/runs and their wall time, whenever and however each was
    trained (a run folder's config.json is written at its start, summary.json at its end; a resumed
    run counts its pause too). A clone keeps no file times (each summary within 0.1 s of its
    config): such a run's minutes are read from `record`, which keeps every run's minutes measured
    while its file times were there (a record of part totals only, as first kept: each run its
    part's mean), else from its metrics (training only); the record is saved with them."""
    saved = json.loads(record.read_text()) if record is not None and record.exists() else {}
    known = dict(saved.get("minutes", {}))
    for part, row in saved.get("table", {}).items():  # the first record: part totals over its runs
        for name in saved.get("runs", []):
            if run_part(name) == part:
                known.setdefault(name, float(row["minutes"]) / row["runs"])
    totals = {}
    for summary in sorted([*runs.glob("*/summary.json"), *runs.glob("*/*/summary.json")]):
        name = str(summary.parent.relative_to(runs))
        seconds = summary.stat().st_mtime - (summary.parent / "config.json").stat().st_mtime
        # no file times and none recorded: its training's own
        if seconds >= 0.1 or not known.get(name):
            known[name] = seconds / 60 if seconds >= 0.1 else training_minutes(summary.parent)
        row = totals.setdefault(run_part(name), {"runs": 0, "minutes": 0.0})
        row["runs"] += 1
        row["minutes"] += known[name]
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"minutes": {name: round(m, 3)
                                                  for name, m in sorted(known.items())},
                                      "measured": "from the runs' file times, else their metrics "
                                                  "(training only)"},
                                     indent=1))
    return {part: {"runs": row["runs"], "minutes": f"{row['minutes']:.1f}"}
            for part, row in totals.items()}


def training_minutes(run: Path) -> float:
    """A run's training time from its metrics.jsonl (each update's seconds; its evaluations not
    counted)."""
    lines = (run
             / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
    return sum(json.loads(line).get("seconds", 0.0) for line in lines if line.strip()) / 60


def run_part(name: str) -> str:
    return next((part for part, prefixes in RUN_PARTS.items() if name.startswith(prefixes)),
                "other")


def frontier_seeds(plan: Plan) -> dict[str, list[int]]:
    seeds = {}
    for name, folder, _ in frontier_runs(plan):
        seeds.setdefault(name, []).append(int(folder.name.rsplit("-s", 1)[1]))
    return seeds


def weight_analyses(plan: Plan, store: Store, matched_models: list[str]) -> dict:
    """Claim 4's: every trained model's drift per module kind (one reused record), the ES/GRPO drift
    ratios over seeds, seed 0's update sparsified, and every seed's update at the paper's
    sparsity."""
    es, grpo, nulls, base = (plan.models("es"), plan.models("grpo"), plan.null_models,
                             plan.base_model)
    null = nulls[0]  # drift and the sparsity sweep: seed 0's; claim 4's comparison: every seed's
    models = [*es, *grpo, null, *matched_models]
    drift_of = dict(zip(models,
                        store.get("drift", [base, *models], drifts, base, models,
                                  plan.analysis_args)))
    masks = SparsityMasks([0.5, PAPER_SPARSITY] if plan.quick else [0.5, PAPER_SPARSITY, 0.95],
                          null=null)
    sparse_args = dataclasses.replace(plan.analysis_args,
                                      eval_samples=min(plan.samples, SPARSITY_SAMPLES))
    return {"drift": drift_table(base,
                                 {model: drift_of[model] for model in (es[0], grpo[0], null)}),
            "drift_ratio": drift_ratio(drift_of, es, grpo),
            "drift_ratio_matched": drift_ratio(drift_of, es,
                                               matched_models) if matched_models else None,
            "module_kinds": {"es": [drift_of[m] for m in es], "grpo": [drift_of[m] for m in grpo]},
            "sparsity": store.get("sparsity", [base, es[0], null], sparsity_analysis, base, es[0],
                                  masks, sparse_args),
            "sparse_seeds": store.get("sparsity-seeds", [base, *es, *nulls], sparse_over_seeds,
                                      base, es, nulls, sparse_args)}


def drift_ratio(drift_of: dict, es_models: list[str], grpo_models: list[str]) -> Interval:
    """ES's total drift over GRPO's, seed for seed, with its interval."""
    ratios = [[drift_of[es]["total"] / drift_of[grpo]["total"]]
              for es, grpo in zip(es_models, grpo_models)]
    return interval(lambda m: m["r"], {"r": np.array(ratios)})  # (seeds, 1)


def evaluations(plan: Plan, store: Store) -> dict:
    """Claims 2 and 5's measurements: forgetting against its noise control, and the ES populations'
    diversity, each saved in pieces (a model's held-out counts, a sigma's population counts), so
    that a reproduction stopped midway keeps the pieces it finished."""
    es, grpo, base = plan.models("es"), plan.models("grpo"), plan.base_model
    forgetting_args = dataclasses.replace(plan.args, eval_samples=min(plan.samples, 64))
    forgetting = forgetting_control(base, es, grpo, forgetting_args,
                                    5 if plan.quick else plan.forgetting_problems, store.get)
    size = 4 if plan.quick else plan.args.es_population
    population = Population(size, [float(f"{plan.args.es_sigma * f:g}") for f in (0.3, 1, 3)],
                            max(size, 4 if plan.quick else plan.diversity_samples))
    diversity_args = dataclasses.replace(plan.analysis_args,
                                         eval_problems=3 if plan.quick else plan.diversity_problems)
    diversity = diversity_analysis(base, population, diversity_args, store.get)
    return {"forgetting": forgetting, "diversity": diversity}


def extra_parts(plan: Plan, store: Store, clock: Stopwatch) -> dict:
    """The parts beyond claims 1-5 (--parts), each run when asked for or when OUT already holds its
    runs."""
    found = {}
    trained = all((plan.runs / f"es-{arm}-s{seed}" / "summary.json").exists() for arm
                  in ("raw", "antithetic")
                  for seed in plan.seeds)
    if "claim6" in plan.parts or trained:
        log("reproduce: claim 6, ES with raw rewards (alpha chosen on dev) and with antithetic "
            "sampling")
        es_updates = plan.updates["es"]
        with clock("claim6"):
            found["arms"] = hyperparameter_arms(plan.runs, plan.flags, plan.seeds, es_updates,
                                                max(1, es_updates // 3),
                                                (8, 80) if plan.quick else RAW_ALPHA_SCALES)
            found["arms"]["raw_run"] = load_runs(plan.runs, {"es-raw": plan.seeds},
                                                 plan.k)["es-raw"]  # its path
    pretrain_flags = ["--steps", "2", "--batch", "8"] if plan.quick else []
    if "sizes" in plan.parts or (plan.out / "models" / "larger" / "pretrain.json").exists():
        populations, sequences = ([2, 4], 64) if plan.quick else ([8, 16, 32], 32 * 64 * 25)
        prompts = 8 if plan.quick else 64
        with clock("sizes"):
            found["sweep"] = population_sweep(plan.runs, plan.sweep_flags, populations, sequences,
                                              prompts)
            found["sizes"] = size_sweeps(plan.out, plan.sweep_flags, populations, sequences,
                                         prompts, found["sweep"], pretrain_flags)
    if "untied" in plan.parts or (plan.out / "models" / "untied" / "pretrain.json").exists():
        with clock("untied"):
            found["untied"] = untied_drift(plan, store, pretrain_flags)
    return found | paper_steps(plan, store, clock)


def untied_drift(plan: Plan, store: Store, pretrain_flags: list[str]) -> dict:
    """Claim 4's module kinds on a model whose LM head is not its embedding matrix: the shipped
    model pretrained again with --no-tie-embeddings (OUT/models/untied), trained by ES and by GRPO
    with the report's settings (the first seed), and drift_analysis per module kind."""
    model, seed = plan.out / "models" / "untied", plan.seeds[0]
    folders = {algo: plan.runs / f"untied-{algo}-s{seed}" for algo in ("es", "grpo")}
    pretrained(model, ["--no-tie-embeddings", *pretrain_flags],
               "the shipped model again with an LM head of its own", list(folders.values()))
    for algo, folder in folders.items():
        train_run(folder,
                  [*plan.flags, "--model", str(model), "--algo", algo, "--steps",
                   str(plan.updates[algo]),
                           "--seed", str(seed)])
    models = [str(folder / f"stage1-{algo}") for algo, folder in folders.items()]
    return store.get("drift-untied", [str(model), *models], drift_analysis, str(model), models,
                     plan.analysis_args)


def paper_steps(plan: Plan, store: Store, clock: Stopwatch) -> dict:
    """Claim 4's drift control: GRPO at the learning rate whose step is ES's per-coordinate step
    over the paper's ratio (PAPER_STEP_RATIO), each seed, and ES's drift over its, when asked for or
    already trained."""
    paper_lr = plan.args.es_alpha * math.sqrt(plan.args.es_population - 1) / plan.args.es_population
    paper_lr /= PAPER_STEP_RATIO
    folders = [plan.runs / f"grpo-paper-steps-s{seed}" for seed in plan.seeds]
    if not ("paper-steps" in plan.parts
            or all((folder / "summary.json").exists() for folder in folders)):
        return {}
    log(f"reproduce: GRPO at lr {paper_lr:.3g}, the paper's per-step ratio to ES "
        f"({PAPER_STEP_RATIO:.1f})")
    with clock("paper-steps"):
        for seed, folder in zip(plan.seeds, folders):
            train_run(folder,
                      [*plan.flags, "--algo", "grpo", "--grpo-lr", f"{paper_lr:.3g}", "--steps",
                               str(plan.updates["grpo"]), "--seed", str(seed)])
    es, grpo = plan.models("es"), [str(folder / "stage1-grpo") for folder in folders]
    models = [*es, *grpo]
    drift_of = dict(zip(models, store.get("drift-paper-steps", [plan.base_model, *models], drifts,
                                          plan.base_model, models, plan.analysis_args)))
    return {"paper_steps": {"lr": paper_lr, "drift_ratio": drift_ratio(drift_of, es, grpo)}}
