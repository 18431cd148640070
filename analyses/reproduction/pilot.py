"""The real model's power plan, from a pilot: the base model on `dev` problems of its task and of a
held-out family, eval_samples samples each at the evaluation temperature, on the fast HF path. From
each problem's count of right answers it reads how far a difference of two models' Pass@K, evaluated
on P problems as the report evaluates them, varies from sampling alone; from the seconds a row took,
what an evaluation costs.

The plan is a lower bound on what a verdict needs: it counts the spread of sampling (binomial, at
the base's per-problem success rates, for Pass@K; for token entropy, each sample's entropy and
tokens, kept) and leaves out two it cannot see from one model, the seed-to-seed spread of trained
runs and the problems' own spread of a true difference. Both only add: fewer problems than it says
cannot decide. For token entropy the problems' spread is also read unpaired (as if two models met
different problems), which bounds it from above.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

import es_grpo
from analyses.evaluation import context, load
from analyses.statistics import PAPER_EFFECTS
from analyses.verdicts import CATASTROPHIC_SHARE, ENTROPY_MARGIN_SHARE
from es_grpo import Context, ESState, GRPOState, master_weights, pass_at_k
from scale.config import Args

Z_POWER = 1.960 + 0.842  # a two-sided 5% test with 80% power, normal quantiles (many problems)


def measure_base(args: Args, heldout: str) -> dict:
    """The base model on `dev` (args.eval_split) problems of args.task and of `heldout`:
    measure_family's."""
    model, tokenizer = load(args.model, args)
    run = context(args, model, tokenizer)
    # the task's problems ("auto" resolved)
    _, evaluation, _ = es_grpo.evaluation_sets(args, tokenizer)
    task = evaluation[0]["task"]
    families = {task: evaluation,
                heldout: es_grpo.evaluation_pool(heldout, args.eval_split)[:args.heldout_problems]}
    return {"model": args.model, "task": task, "heldout": heldout, "split": args.eval_split,
            "samples": args.eval_samples, "temperature": args.eval_temperature,
            "max_new_tokens": args.max_new_tokens,
            "families": {family: measure_family(run, family, problems)
                         for family, problems in families.items()}}


def measure_family(run: Context, family: str, problems: list[dict]) -> dict:
    """Each problem's right answers and, for each of its samples, the entropy summed over its tokens
    and those tokens (es_grpo.evaluate's rows, kept apart: sampling's spread of entropy is read from
    them; entropy to 1e-4 nats, a float32 sum's precision); sampled in groups of problems that fill
    one batch; the seconds a sample took."""
    n, tick = run.args.eval_samples, time.time()
    group = max(1, run.args.rollout_batch // n)  # problems a batch holds
    measured = {"correct": [], "sample_entropy_sums": [], "sample_lengths": []}
    for start in range(0, len(problems), group):
        part = problems[start:start + group]
        graded = es_grpo.sample_and_grade(run, [p for p in part for _ in range(n)], progress=False)
        # (problems, samples) each
        rewards, sums, tokens = (np.array(graded[key]).reshape(len(part), n)
                                 for key in ("rewards", "entropy_sums", "tokens"))
        measured["correct"] += (rewards == 1.0).sum(1).tolist()
        measured["sample_entropy_sums"] += sums.round(4).tolist()
        measured["sample_lengths"] += tokens.tolist()
        es_grpo.log(f"pilot: {family}, {start + len(part)}/{len(problems)} problems, "
                    f"{time.time() - tick:.0f} s")
    return measured | {"length": float(np.mean(measured["sample_lengths"])),
                       "seconds_per_row": (time.time() - tick) / (len(problems) * n)}


def measured_as(pilot: dict, args: Args, heldout: str) -> bool:
    """Whether a saved pilot evaluated what args and heldout ask for."""
    asked = {"model": args.model, "heldout": heldout, "split": args.eval_split,
             "samples": args.eval_samples,
             "temperature": args.eval_temperature, "max_new_tokens": args.max_new_tokens}
    families = pilot.get("families", {}).values()
    counts = [len(family["correct"]) for family in families]
    # each sample's entropy: older pilots lack it
    kept = all("sample_lengths" in family for family in families)
    return {key: pilot.get(key) for key
            in asked} == asked and args.task in ("auto", pilot.get("task")) and kept \
        and counts == [args.eval_problems, args.heldout_problems]


def measure_updates(args: Args, task: str) -> dict:
    """Seconds of one ES update (es_population members x es_prompts, greedy) and one GRPO step
    (grpo_prompts x grpo_group) at these settings on the fast HF path: the first of each, warm-up
    included (an update takes minutes at 135M)."""
    model, tokenizer = load(args.model, args)
    train = es_grpo.generate_problems(task, 64, seed=11, exclude=es_grpo.never_trained_on())
    seconds = {}
    params = list(model.parameters())
    es = ESState(params, master_weights(params))
    es_run = context(args, model, tokenizer)
    trainer = copy.deepcopy(model).train()
    grpo = GRPOState(torch.optim.AdamW(trainer.parameters(), lr=args.grpo_lr, weight_decay=0.0),
                     copy.deepcopy(model).requires_grad_(False))
    grpo_run = context(args, trainer, tokenizer)
    for name, step in (("es_update",
                        lambda i: es_grpo.es_step(es_run, es, train[:args.es_prompts], i)),
                       ("grpo_step",
                        lambda i: grpo_run.grpo_step(grpo_run, grpo, train[:args.grpo_prompts],
                                                     i))):
        tick = time.time()
        step(0)
        seconds[name] = time.time() - tick
        es_grpo.log(f"pilot: one {name.replace('_', ' ')}, {seconds[name]:.0f} s")
    return {"seconds": seconds, "settings": update_settings(args)}


def update_settings(args: Args) -> dict:
    """The settings an update's seconds depend on (the model and the task aside)."""
    return {name: getattr(args, name) for name in (
        "es_population", "es_prompts", "grpo_prompts", "grpo_group", "grpo_microbatch",
        "max_new_tokens", "dtype")}


def estimator_variance(n: int, k: int, p: float) -> float:
    """The variance of the unbiased Pass@k estimator from n samples of a problem solved with
    probability p."""
    counts = np.arange(n + 1)
    weights = np.array([math.comb(n, c) * p ** c * (1 - p) ** (n - c) for c in counts])
    values = np.array([pass_at_k(n, int(c), k) for c in counts])
    return float(weights @ values ** 2 - (weights @ values) ** 2)


def difference_variance(correct: list[int], n: int, k: int) -> float:
    """The variance, from sampling alone, of a difference of two models' Pass@k on one problem like
    these (each model's n samples drawn independently, at the base's rate)."""
    return 2 * float(np.mean([estimator_variance(n, k, c / n) for c in correct]))


def base_entropy(family: dict) -> float:
    """The base model's token entropy on the family: its samples' entropy over their tokens
    (evaluate's)."""
    return float(np.sum(family["sample_entropy_sums"]) / np.sum(family["sample_lengths"]))


def entropy_deviations(family: dict) -> tuple[np.ndarray, float]:
    """Each sample's entropy sum less the token entropy times its tokens (problems, samples), and
    the mean tokens a sample: the token entropy, a ratio of sums, moves by their mean over the mean
    tokens (linearised)."""
    sums, lengths = (np.array(family[key],
                              dtype=float) for key in ("sample_entropy_sums", "sample_lengths"))
    return sums - base_entropy(family) * lengths, float(lengths.mean())  # (P, n), tokens


def entropy_difference_variance(family: dict, samples: int) -> float:
    """The variance, from sampling alone, of a difference of two models' token entropy on one
    problem like these (each model's `samples` samples drawn independently, at the base's spread
    within a problem)."""
    deviations, tokens = entropy_deviations(family)
    return 2 * float(deviations.var(axis=1, ddof=1).mean()) / (samples * tokens ** 2)


def unpaired_entropy_variance(family: dict, samples: int) -> float:
    """The same read unpaired, as if the two models met different problems: the problems' spread of
    their mean deviation, its sampling part rescaled to `samples` samples: an upper bound on a
    paired difference's."""
    deviations, tokens = entropy_deviations(family)
    within = deviations.var(axis=1, ddof=1).mean()
    # sampling's out
    problems = max(deviations.mean(axis=1).var(ddof=1) - within / deviations.shape[1], 0.0)
    between = problems + within / samples
    return 2 * float(between) / tokens ** 2


def fewest_problems(variance: float, effect: float) -> int:
    """Problems at which a mean difference of per-problem `variance` detects `effect` (80% power; 0:
    unknown)."""
    return max(1, math.ceil(variance * (Z_POWER / effect) ** 2)) if np.isfinite(variance) else 0


# The update shapes the plan prices (ES: N=16 x 16 prompts, the paper's larger models' population;
# GRPO: 8 prompts
# x 8, the paper's group) and the longest completion a training rollout may have (two-digit sums end
# in 15-90
# tokens at T = 0.6: docs/real-model.md). GRPO's backward in micro-batches of 16 rows: all 64 at
# once, float32,
# does not fit in 24 GB (report/NOTES.md, "What 2 CPU cores cannot do").
UPDATE_SHAPE = {"es_population": 16, "es_prompts": 16, "grpo_prompts": 8, "grpo_group": 8,
                "max_new_tokens": 128, "grpo_microbatch": 16}
QUICK_SHAPE = {"es_population": 2, "es_prompts": 2, "grpo_prompts": 2, "grpo_group": 2,
               "max_new_tokens": 16, "grpo_microbatch": 2}


@dataclasses.dataclass(frozen=True)
class Need:
    """One verdict's comparison: a difference of two models' mean Pass@k (or token entropy) on
    `family`, against `effect`."""
    claim: str
    family: str  # "task" or "heldout"
    k: int  # Pass@k (0: token entropy)
    effect: float
    # models the comparison evaluates (one seed), its base's included where it reads one
    evaluations: int


def needs(pilot: dict) -> list[Need]:
    """The comparisons the real model's verdicts rest on, with the paper's effect (or the margin
    where a claim is read against one: statistics.py's shares of the base's value)."""
    task, held = (pilot["families"][pilot[key]] for key in ("task", "heldout"))
    n = pilot["samples"]
    held32 = np.mean([pass_at_k(n, c, 32) for c in held["correct"]])
    return [Need("1: ES's Pass@1 above the base's", "task", 1, PAPER_EFFECTS["es_pass1_gain"], 2),
            Need("1: ES's Pass@32 above GRPO's at matched Pass@1", "task", 32,
                 PAPER_EFFECTS["passk_es_minus_grpo"], 3),
            Need("1: ES keeps the base's Pass@32", "task", 32, PAPER_EFFECTS["es_passk_change"], 2),
            Need("1: GRPO's entropy falls (a twentieth of the base's)", "task", 0,
                 ENTROPY_MARGIN_SHARE * base_entropy(task), 2),
            Need("3: GRPO->ES's Pass@32 above GRPO's at matched Pass@1", "task", 32,
                 PAPER_EFFECTS["passk_es_minus_grpo"], 3),
            Need("5: no held-out Pass@32 fall of a tenth of the base's after ES", "heldout", 32,
                 CATASTROPHIC_SHARE * held32, 2)]


def plan_rows(pilot: dict, pool: int = es_grpo.EVAL_POOL) -> list[dict]:
    """Each need's sampling-only standard error at `pool` problems, the smallest effect it lets a
    test detect, the problems the paper's effect (or margin) needs, and the hours of evaluation that
    takes."""
    n, rows = pilot["samples"], []
    for need in needs(pilot):
        family = pilot["families"][pilot["task" if need.family == "task" else "heldout"]]
        variance = difference_variance(family["correct"], n, need.k) if need.k else \
            entropy_difference_variance(family, n)
        se, problems = math.sqrt(variance / pool), fewest_problems(variance, need.effect)
        seconds = family["seconds_per_row"] * n * problems * need.evaluations
        rows.append({"need": need, "se": se, "detectable": Z_POWER * se, "problems": problems,
                     "hours": seconds / 3600})
    return rows


def plan_table(pilot: dict) -> list[str]:
    """The plan as markdown rows: each need at the built-in pool of EVAL_POOL problems and at what
    it needs."""
    lines = [f"| claim: comparison | the paper's effect or margin | sampling SE at "
             f"{es_grpo.EVAL_POOL} problems | "
             f"detectable at {es_grpo.EVAL_POOL} (80%) | problems needed, sampling alone | hours "
             f"of evaluation |", "|---|---|---|---|---|---|"]
    for row in plan_rows(pilot):
        need = row["need"]
        beyond = " (beyond the built-in pool)" if row["problems"] > es_grpo.EVAL_POOL else ""
        needed = (f"{row['problems']:,}{beyond} | {row['hours']:.1f} ({need.evaluations} models)"
                  if row["problems"] else "- | -")
        spread = f"{row['se']:.4f} | {row['detectable']:.4f}" if np.isfinite(row["se"]) else "- | -"
        lines.append(f"| {need.claim} | {need.effect:.4f} | {spread} | {needed} |")
    return lines


def write_pilot(pilot: dict, out: Path):
    """pilot.json, and POWER.md: what the base measured, what an update costs, and the plan's
    table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "pilot.json").write_text(json.dumps(pilot))  # a sample's numbers each: one line
    n, lines = pilot["samples"], [f"# The real model's power plan: {pilot['model']}", "",
                                  f"Made by `{pilot['command']}`.", ""]
    for name, family in pilot["families"].items():
        correct = family["correct"]
        lines.append(f"- {name} ({pilot['split']}, {len(correct)} problems x {n} samples, T = "
                     f"{pilot['temperature']}, <= {pilot['max_new_tokens']} new tokens): Pass@1 "
                     f"{np.mean(correct) / n:.3f}, Pass@32 "
                     f"{np.mean([pass_at_k(n, c, 32) for c in correct]):.3f}, "
                     f"Pass@{n} {np.mean([c > 0 for c in correct]):.3f}, problems never solved "
                     f"{np.mean([c == 0 for c in correct]):.2f}, entropy "
                     f"{base_entropy(family):.3f} nats, "
                     f"{family['length']:.0f} tokens a completion, {family['seconds_per_row']:.2f} "
                     f"s a completion")
    updates = pilot.get("updates")
    if updates:
        shape = updates["settings"]
        lines.append(f"- one ES update (N = {shape['es_population']} x {shape['es_prompts']} "
                     f"prompts, greedy) "
                     f"{updates['seconds']['es_update']:.0f} s; one GRPO step "
                     f"({shape['grpo_prompts']} prompts x "
                     f"{shape['grpo_group']}) {updates['seconds']['grpo_step']:.0f} s; <= "
                     f"{shape['max_new_tokens']} new tokens, {shape['dtype']}")
    task, pool = pilot["families"][pilot["task"]], es_grpo.EVAL_POOL
    unpaired = math.sqrt(unpaired_entropy_variance(task, n) / pool)
    reading = ("Every row counts the spread of sampling alone, at the base's per-problem rates "
               "(Pass@K) or its "
               "samples' entropy and tokens (entropy): a lower bound on what a verdict needs "
               "(seeds, and the "
               "problems' spread of a true difference, add to it). Read unpaired, as if two models "
               "met different "
               f"problems, the entropy row's SE at {pool} problems would be {unpaired:.4f}: an "
               f"upper bound. Hours: "
               f"evaluations of that many problems x {n} samples, at the seconds a completion took "
               f"here; training comes on top.")
    (out / "POWER.md").write_text("\n".join([*lines, "", reading, "", *plan_table(pilot), ""]))


def power_plan(args: Args, heldout: str, out: Path, quick: bool, command: str) -> dict:
    """`eval.py pilot`: the base model measured (or its saved measurement of the same settings read
    back), an update's seconds measured once for the model, task and shape (quick: QUICK_SHAPE),
    then OUT/pilot.json and OUT/POWER.md written."""
    saved = json.loads((out / "pilot.json").read_text()) if (out / "pilot.json").is_file() else {}
    pilot = saved if measured_as(saved, args, heldout) else measure_base(args, heldout)
    shape = dataclasses.replace(args, **(QUICK_SHAPE if quick else UPDATE_SHAPE))
    updates = saved.get("updates", {})
    if (saved.get("model"), saved.get("task")) != (args.model, pilot["task"]) or \
            updates.get("settings") != update_settings(shape):
        updates = measure_updates(shape, pilot["task"])
    pilot |= {"command": command, "updates": updates}
    write_pilot(pilot, out)
    return pilot
