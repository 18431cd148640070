"""The bootstrap's own error, checked: every claim judged again under other bootstrap seeds (the
matched comparisons drawn again too), so that REPORT.md can say whether any part's outcome moves
with the seed, and the largest Monte Carlo error of a bound. A statistic affine in the means has an
exact variance (statistics. interval) and cannot move; the others are drawn statistics.DRAWS
times."""
from __future__ import annotations

import dataclasses

from analyses.paths import comparisons
from analyses.reproduction.claims import judge
from analyses.reproduction.evidence import Evidence
from analyses.statistics import Interval, bootstrap_seed
from analyses.verdicts import OUTCOMES

# bootstrap seeds every outcome is checked under (seed 0, the report's, among them)
STABILITY_SEEDS = 20


def outcomes(evidence: Evidence) -> dict[str, str]:
    """Every scored part's outcome, by claim and part."""
    return {f"{claim.number}: {c.name}": OUTCOMES[c.outcome] for claim in judge(evidence) for c
            in claim.conditions}


def stability(evidence: Evidence, claims: list) -> dict:
    """The report's outcomes (`claims`, bootstrap seed 0) against those of the same evidence judged
    under bootstrap seeds 1..STABILITY_SEEDS-1 (--quick: 1): {"seeds", "changed": {part: [outcome
    under each seed]} for any part whose outcome moved, "largest_mc_error": (part, error) of the
    largest Monte Carlo error of a bound}."""
    seeds = 2 if evidence.plan.quick else STABILITY_SEEDS
    report = {f"{claim.number}: {c.name}": OUTCOMES[c.outcome] for claim in claims for c
              in claim.conditions}
    seen = {part: [outcome] for part, outcome in report.items()}
    for seed in range(1, seeds):
        with bootstrap_seed(seed):
            again = dataclasses.replace(evidence, rows=comparisons(evidence.runs, evidence.plan.k))
            for part, outcome in outcomes(again).items():
                seen[part].append(outcome)
    errors = {f"{claim.number}: {c.name}": c.value.mc_error for claim in claims for c
              in claim.conditions
              if isinstance(c.value, Interval)}
    worst = max(errors, key=errors.get) if errors else ""
    return {"seeds": seeds,
            "changed": {part: found for part, found in seen.items() if len(set(found)) > 1},
            "largest_mc_error": [worst, errors.get(worst, 0.0)]}
