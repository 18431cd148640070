"""The comparisons at matched Pass@1 that claims 1, 2 and 6 read off the evidence: the GRPO models
trained to ES's Pass@1, claim 1's frontier over learning rates, and z-scored ES against raw rewards
(claim 1's matching: one run at its end against the other's path where it reaches that Pass@1)."""
from __future__ import annotations

import numpy as np

from analyses.paths import at_level, end_of, finals_array, matched, path_arrays
from analyses.statistics import (DRAWS, Interval, entropy_change, entropy_data, interval,
                                 resample_weights, token_entropy)


def claim1_matched_values(runs: dict, matched: dict, k: int) -> dict:
    """Claim 1's trade-off from the GRPO models trained to ES's Pass@1 (grpo_at_gain), evaluated
    like ES at the end: ES's Pass@k minus theirs, adjusted for what Pass@1 mismatch remains by the
    slope of Pass@k against Pass@1 along GRPO's mean path at the matched point (stated beside it);
    and the range of updates at which GRPO's path reaches ES's Pass@1 over problem and seed draws
    (the matched point's uncertainty)."""
    n = runs["es"]["config"]["eval_samples"]
    if not matched["updates"]:
        return {}
    path = path_arrays(runs["grpo"]["paths"], k)
    p1, pk = path["pass@1"].mean((1, 2)), path[f"pass@{k}"].mean((1, 2))  # (points,)
    level = finals_array(runs["es"]["finals"], n, 1).mean()
    after = int(np.argmax(p1 >= level)) if (p1 >= level).any() else len(p1) - 1
    before = max(after - 1, 0)
    slope = float((pk[after] - pk[before])
                  / (p1[after] - p1[before])) if p1[after] != p1[before] else 0.0
    data = {"e1": finals_array(runs["es"]["finals"], n, 1),
            "ek": finals_array(runs["es"]["finals"], n, k),
            "g1": finals_array(matched["finals"], n, 1),
            "gk": finals_array(matched["finals"], n, k)}
    rng, (_, seeds, problems) = np.random.default_rng(0), path["pass@1"].shape
    by_seed, by_problem = (resample_weights(rng.integers(size, size=(DRAWS, size)),
                                            size) for size in (seeds, problems))
    levels = np.einsum("ds,dp,sp->d", by_seed, by_problem, data["e1"])  # ES's Pass@1 in each draw
    # GRPO's path in each draw
    pass1 = np.einsum("ds,dp,tsp->dt", by_seed, by_problem, path["pass@1"])
    reached = at_level(pass1, np.broadcast_to(path["update"], pass1.shape), levels)
    reached = reached[np.isfinite(reached)]
    return {"matched_grpo_updates": matched["updates"],
            "passk_es_minus_grpo_matched_models": interval(
                lambda m: (m["ek"] - m["gk"]) - slope * (m["e1"] - m["g1"]), data),
            "matched_pass1_mismatch": interval(lambda m: m["e1"] - m["g1"], data),
            "matched_slope": slope,
            "matched_updates_range": (float(np.percentile(reached, 2.5)),
                                      float(np.percentile(reached, 97.5)))
            if len(reached) else (float("nan"),) * 2}


def frontier_values(runs: dict, frontier: dict, k: int) -> dict:
    """Claim 1 on the frontier: at each ES rate's Pass@1 (its models at their end), its token
    entropy and Pass@k minus the best of GRPO's paths there, every learning rate's (per draw: the
    envelope of the paths), over the seeds every run has; and each GRPO rate's entropy at its end
    relative to the base model's."""
    runs = {**frontier, "grpo": runs["grpo"], "es": runs["es"]}
    seeds = min(len(run["finals"]) for run in runs.values())
    grpo = [path_arrays(run["paths"][:seeds], k)
            for name, run in runs.items() if name.startswith("grpo")]
    paths = {}  # every GRPO path's arrays, the path's number after each name
    for i, path in enumerate(grpo):
        paths |= {f"pass@1_{i}": path["pass@1"], f"pass@{k}_{i}": path[f"pass@{k}"],
                  **entropy_data(f"entropy_{i}", path)}
    value = lambda m, key, i: (token_entropy(m, f"{key}_{i}") if key == "entropy"  # noqa: E731
                               else m[f"{key}_{i}"])

    # (draws,) the best GRPO path's `key` where it reaches ES's Pass@1, nan if none does
    def envelope(m, key):
        reached = np.stack([at_level(m[f"pass@1_{i}"], value(m, key, i),
                                     m["e1"]) for i in range(len(grpo))])
        return np.where(np.isfinite(reached).any(0),
                        np.nanmax(np.where(np.isfinite(reached), reached, -np.inf), 0), np.nan)
    result = {"frontier_rates": {name: len(run["finals"]) for name, run in runs.items()},
              "frontier_seeds": seeds,
              "frontier_updates": {name: run["config"]["steps"] for name, run in runs.items()}}
    for name, run in runs.items():
        if name.startswith("es"):
            end = end_of(run, k)
            data = {"e1": end["pass@1"][:seeds], "ek": end[f"pass@{k}"][:seeds],
                    **{key: array[:seeds] for key, array in entropy_data("ee", end).items()},
                    **paths}
            result[f"frontier_entropy_{name}"] = interval(
                lambda m: token_entropy(m, "ee") - envelope(m, "entropy"), data)
            result[f"frontier_passk_{name}"] = interval(
                lambda m: m["ek"] - envelope(m, f"pass@{k}"), data)
        else:
            result[f"entropy_fall_{name}"] = entropy_change(
                run["finals"], run["base"], relative=True)
    return result


def zscore_at_matched_pass1(zscored: dict, raw: dict, k: int) -> Interval:
    """Z-scored ES's Pass@k minus raw rewards' where their Pass@1 match (load_runs' records, the
    same seeds): the run that ends at the lower Pass@1, at its end, against the other's path there
    (claim 1's matching)."""
    z_end, raw_end = end_of(zscored, k), end_of(raw, k)
    z_path, raw_path = path_arrays(zscored["paths"], k), path_arrays(raw["paths"], k)
    if z_end["pass@1"].mean() <= raw_end["pass@1"].mean():
        return matched(z_end, raw_path, "pass@1", k)[f"pass@{k}"]
    ci = matched(raw_end, z_path, "pass@1", k)[f"pass@{k}"]
    return ci.negated()
