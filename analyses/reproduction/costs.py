"""What the report's runs cost and what deciding more would cost: REPORT.md's budgets of each
schedule, the wall time of each part and the power plan (for each undecided condition, the seeds or
problems that would decide it, and their hours)."""
from __future__ import annotations

import math

from analyses.paths import LABELS
from analyses.reproduction.evidence import Evidence
from analyses.statistics import (Interval, detectable, informative, mean_std, problems_for,
                                 seeds_for)
from analyses.verdicts import Claim, MIN_SEEDS, OUTCOMES, falls, keeps, no_gain, rises
from es_grpo import markdown_table


def budgets_section(evidence: Evidence) -> list[str]:
    budget = {}
    for name, run in evidence.runs.items():
        stages = " + ".join(f"{u} {s.upper()}" for s, u in run["stages"])
        budget[LABELS[name]] = {"updates": stages,
                                **{key: mean_std(run["totals"][key]) for key in run["totals"]},
                                "trajectory every": f"{run['config']['eval_every']} updates"}
    return [
        "## Budgets", "",
        "Per run, mean ± std over seeds: sequences, tokens and seconds over all stages (training "
        f"only). GRPO->ES and ES->GRPO split their {evidence.plan.updates['grpo-es']} updates "
        "evenly (the paper; `--steps`, by default 100, sized for a few hours of runs on 2 CPU "
        "cores with 5 seeds and 500 problems: the wall times below); ES alone gets GRPO->ES's "
        "sequences; GRPO alone runs twice GRPO->ES's updates, so that its path holds the matched "
        "points (matching its sequences to ES's would take about 8x more GRPO updates: compute is "
        "matched where the one that spent less ends).", "",
        markdown_table(budget, list(next(iter(budget.values()))), "schedule"), ""]


def minutes_section(evidence: Evidence) -> list[str]:
    minutes = {part: {"minutes": f"{value:.1f}"} for part, value in evidence.minutes.items()}
    runs = evidence.run_minutes
    reused = "; ".join(f"{name}, measured {made}" for name, made in evidence.reused.items())
    return ["## Wall time of each part", "",
            "This invocation, on this machine (a run found finished in runs/ costs nothing here):",
            "", markdown_table(minutes, ["minutes"], "part"), "",
            "The analyses read from analyses/reused/ (each reused only while its version, its "
            "arguments and its models' runs are the same: analyses/reproduction/reuse.py): "
            f"{reused or 'none'}.", "",
            "The runs in runs/, whenever they were trained (each from its config.json to its "
            "summary.json: training and the evaluations inside the run; the analyses' own "
            "evaluations are in the table above):", "",
            markdown_table(runs, ["runs", "minutes"], "part"), ""] if minutes else []


# the runs a seed of each claim needs
SEED_PARTS = {1: ("claims: the schedule runs", "claims: the null and matched runs"),
              2: ("claims: the schedule runs", "claims: the null and matched runs"),
              3: ("claims: the schedule runs",),
              4: ("claims: the schedule runs", "claims: the null and matched runs"),
              5: ("claims: the schedule runs",), 6: ("claim6",)}


def power_section(evidence: Evidence, claims: list[Claim]) -> list[str]:
    """For each undecided condition: the smallest effect detected now, the target (the paper's
    effect, else the margin), the seeds (statistics.seeds_for) or the problems (problems_for) that
    would detect it with 80% power, and what the seeds cost here."""
    seeds, minutes = len(evidence.plan.seeds), evidence.run_minutes
    per_seed = {claim: sum(float(minutes[part]["minutes"]) for part in parts if part in minutes)
                / seeds for claim, parts in SEED_PARTS.items()}
    rows = [power_row(claim.number, c, seeds, per_seed[claim.number]) for claim in claims
            for c in claim.conditions]
    return ["## Power plan", "",
            "For each scored condition: its outcome now, the smallest effect its test detects (80% "
            "power, 5% two-sided), the effect it should detect (the paper's, else its margin) and, "
            "where it is undecided, what would detect that: more seeds with the problems and "
            "samples as now, more problems with the seeds as now (the paired per-problem spread: "
            "more samples per problem shrink only its binomial part), or both, each times the "
            "variance's excess. The seeds' share of each variance is read back from its interval's "
            "Welch-Satterthwaite degrees of freedom. Hours: the runs of the added seeds (per seed "
            "on this machine: "
            + ", ".join(f"claim {claim} {m:.0f} min" for claim, m in per_seed.items())
            + "); more problems add evaluation time in proportion (the evaluation pool has "
            f"{evidence.runs['es']['config']['eval_problems']} problems; the task's generator "
            f"makes more).", "",
            "| claim | condition | now | detectable now | target | seeds alone | problems alone | "
            "seeds and problems |", "|---|---|---|---|---|---|---|---|", *rows, ""]


# the tests the power plan sizes (an effect of the target's size)
PLANNED = (rises, falls, keeps, no_gain)


def power_row(number: int, c, seeds: int, per_seed: float) -> str:
    """A condition's row of the power plan; per_seed: the minutes of runs one more seed costs."""
    target = c.effect if c.effect is not None else c.margin
    # a bound, a count: no plan
    if c.test not in PLANNED or not isinstance(c.value, Interval) or target is None:
        return (f"| {number} | {c.name} | {OUTCOMES[c.outcome]} | {detectable(c.value)} | - | - | "
                f"- | - |")
    if c.outcome is not None or not informative(c.value):  # decided, or no spread to plan from
        return (f"| {number} | {c.name} | {OUTCOMES[c.outcome]} | {detectable(c.value)} | "
                f"{target:.4g} | - | - | - |")
    needed, factor = seeds_for(c.value, target, seeds), problems_for(c.value, target, seeds)
    # undecided for want of seeds: their spread is not in the interval, so not in the plan
    if c.one_seed:
        return (f"| {number} | {c.name} | undecided: {c.drawn} (over problems: "
                f"{OUTCOMES[c.measured]}) | {detectable(c.value)} | {target:.4g} | {MIN_SEEDS} "
                f"at least (their spread unmeasured) | "
                f"{f'{factor:.1f}x' if factor else 'no number'} | - |")
    # seeds and problems both times this: the variance over it
    excess = (c.value.detectable / target) ** 2
    both = math.ceil(seeds * excess)
    hours = lambda count: f"{(count - seeds) * per_seed / 60:.0f} h"  # noqa: E731
    return (f"| {number} | {c.name} | undecided | {detectable(c.value)} | {target:.4g} | "
            + (f"{needed} ({hours(needed)})" if needed else "over 200")
            + f" | {f'{factor:.1f}x' if factor else 'no number'} | {both} seeds and {excess:.1f}x "
              f"({hours(both)}) |")
