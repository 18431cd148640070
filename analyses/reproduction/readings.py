"""What each of the paper's claims reads off the evidence: its values, each an interval (estimate,
low, high) with what it rests on, a count of seeds, or a number (claims.py reads its parts and shown
values from them)."""
from __future__ import annotations

import numpy as np

from analyses.paths import end_of, finals_array, matched_entropy, path_arrays
from analyses.reproduction.evidence import Evidence
from analyses.reproduction.matching import (claim1_matched_values, frontier_values,
                                            zscore_at_matched_pass1)
from analyses.statistics import (Interval, combined, entropy_change, interval, paired_difference,
                                 per_problem, saved_interval)
from analyses.verdicts import CATASTROPHIC_SHARE, ENTROPY_MARGIN_SHARE, EXPLAINED_SHARE, SeedCount
from analyses.weights import gaussian_kept_share, module_kinds_seeds

SATURATION = 0.95  # a Pass@1 this high leaves a model no room to show a loss of coverage


def versus(rows: dict, first: str, second: str, axis: str) -> dict | None:
    """The matched comparison of `first` against `second` at matched `axis` (paths.comparisons names
    it after the schedule that spent less), each interval oriented first minus second; None if not
    made."""
    for a, b, sign in ((first, second, 1), (second, first, -1)):
        row = rows.get(f"{a} vs {b}, at {a}'s {axis}")
        if row is not None:
            return {key: (ci if sign > 0 else ci.negated()) if isinstance(ci, Interval) else ci
                    for key, ci in row.items()}
    return None


def es_pass1_gain(runs: dict) -> Interval:
    """ES's Pass@1 at its end minus the base model's, seed for seed (claims 1 and 4)."""
    es, n = runs["es"], runs["es"]["config"]["eval_samples"]
    return paired_difference(finals_array(es["finals"], n, 1), finals_array(es["base"], n, 1))


def ceilings(runs: dict, frontier: dict, k: int) -> dict:
    """Where a GRPO-trained run (every learning rate's, and GRPO->ES) leaves no room for a loss of
    coverage: its highest mean Pass@1 along its path and the first update where it reaches the base
    model's Pass@k (from there its Pass@k cannot be below the base's: Pass@k >= Pass@1 on every
    problem) or SATURATION."""
    grpo = {**{name: run for name, run in frontier.items() if name.startswith("grpo")},
            **{name: runs[name] for name in ("grpo", "grpo-es") if name in runs}}
    n = runs["es"]["config"]["eval_samples"]
    base = float(finals_array(runs["es"]["base"], n, k).mean())
    found = {}
    for name, run in grpo.items():
        path = path_arrays(run["paths"], k)
        points = list(zip(path["update"], path["pass@1"].mean((1, 2))))  # (update, mean Pass@1)
        first = [next((int(u) for u, p in points if p >= level),
                      None) for level in (base, SATURATION)]
        found[name] = {"highest_pass1": float(max(p for _, p in points)),
                       "end_pass1": float(points[-1][1]),
                       "reaches_base_passk": first[0], "saturates": first[1]}
    levels = {name: float(finals_array(runs[name]["finals"], n,
                                       1).mean()) for name in ("es", "grpo-es")
              if name in runs}  # where the parts at matched Pass@1 meet GRPO's paths
    return {"base_passk": base, "runs": found, "matched_levels": levels}


def claim1_values(runs: dict, rows: dict, frontier: dict, k: int,
                  matched: dict | None = None) -> dict:
    """ES against the base and GRPO: Pass@1, Pass@k and entropy at the runs' ends and where GRPO's
    calibrated path reaches ES's Pass@1; GRPO against ES at matched sequences; where GRPO's runs
    saturate; with claim1_matched_values' and frontier_values' (claim 1's trade-off). runs,
    frontier: load_runs' (at least "es" and "grpo"); rows: paths.comparisons'; matched:
    grpo_at_gain's (None: no GRPO models trained to ES's Pass@1)."""
    n = runs["es"]["config"]["eval_samples"]
    base = finals_array(runs["es"]["base"], n, k)
    at_es = matched_entropy(end_of(runs["es"], k), path_arrays(runs["grpo"]["paths"], k),
                            runs["grpo"]["base"])
    base_entropy = float(np.mean([row["entropy"] for row in runs["grpo"]["base"]]))
    grpo_vs_es = versus(rows, "GRPO", "ES", "sequences")
    values = {"k": k, "es_pass1_gain": es_pass1_gain(runs),
              "entropy_margin": ENTROPY_MARGIN_SHARE * base_entropy,
              "entropy_es_minus_grpo_at_es_pass1": at_es["difference"],
              "grpo_entropy_relative_change_at_es_pass1": at_es["relative"],
              "grpo_updates": runs["grpo"]["config"]["steps"],
              "es_passk_change": paired_difference(finals_array(runs["es"]["finals"], n, k), base),
              "grpo_pass1_change": paired_difference(finals_array(runs["grpo"]["finals"], n, 1),
                                                     finals_array(runs["grpo"]["base"], n, 1)),
              "grpo_entropy_change": entropy_change(runs["grpo"]["finals"], runs["grpo"]["base"]),
              "grpo_entropy_relative_change": entropy_change(
                  runs["grpo"]["finals"], runs["grpo"]["base"], relative=True),
              "grpo_passk_change": paired_difference(
                  finals_array(runs["grpo"]["finals"], n, k), base),
              "passk_es_minus_grpo_at_es_pass1": rows["ES vs GRPO, at ES's Pass@1"][f"pass@{k}"],
              "ceilings": ceilings(runs, frontier, k)}
    if grpo_vs_es is not None:
        values |= {"grpo_minus_es_pass1_at_sequences": grpo_vs_es["pass@1"],
                   "grpo_minus_es_sequences": grpo_vs_es["where"]}
    return (values | (claim1_matched_values(runs, matched, k) if matched else {})
            | (frontier_values(runs, frontier, k) if frontier else {}))


def es_passk_advantage(e: dict) -> tuple:
    """ES's Pass@K minus GRPO's at ES's Pass@1 (claims 1 and 2): from the GRPO models trained to it
    where they were (claim1_matched_values), else from GRPO's calibrated path."""
    return e.get("passk_es_minus_grpo_matched_models", e["passk_es_minus_grpo_at_es_pass1"])


def claim2_values(evidence: Evidence, claim1: dict) -> dict:
    """The ES population's coverage at the runs' sigma (diversity_row's intervals, saved with the
    counts), and the trained ES model's Pass@K advantage over GRPO at its Pass@1, which the
    population's diversity is to explain (claim 1's values give it), and the JS part minus
    EXPLAINED_SHARE of that advantage."""
    diversity, k = evidence.diversity[f"sigma={evidence.plan.args.es_sigma:g}"], evidence.plan.k
    advantage = es_passk_advantage(claim1)
    js_part = saved_interval(diversity, "gain_counts")
    return {"k": k, "diversity_ratio": saved_interval(diversity, "ratio"),
            "population_gain_vs_centre": saved_interval(diversity, "gain_vs_centre"),
            "diversity_js_gain": saved_interval(diversity, "gain"),
            "diversity_js_gain_counts": js_part,
            "diversity_mean_policy_gain": saved_interval(diversity, "mean_policy_gain"),
            "js_pol": diversity["js_pol"], "es_passk_advantage": advantage,
            "js_part_minus_explained_share": explained(js_part, advantage)}


def explained(js_part: Interval, advantage: Interval) -> Interval:
    """The JS part minus EXPLAINED_SHARE of the advantage it is to explain (two measurements: claim
    2's)."""
    return combined(js_part, advantage, EXPLAINED_SHARE)


def claim3_values(evidence: Evidence) -> dict:
    """GRPO->ES against GRPO alone (equal updates, and where GRPO's path reaches its Pass@1) and ES
    alone."""
    rows, k = evidence.rows, evidence.plan.k
    return {"k": k,
            "grpo_es_pass1_minus_grpo": rows["GRPO->ES vs GRPO, at equal updates"]["pass@1"],
            "grpo_es_passk_minus_es": rows["GRPO->ES vs ES alone, at equal sequences"][f"pass@{k}"],
            "grpo_es_passk_minus_grpo_at_pass1":
                rows["GRPO->ES vs GRPO, at GRPO->ES's Pass@1"][f"pass@{k}"],
            "grpo_es_pass1_minus_es": rows["GRPO->ES vs ES alone, at equal sequences"]["pass@1"]}


def claim4_values(evidence: Evidence) -> dict:
    """Every ES seed's update at the paper's sparsity against Gaussian geometry, each seed's null
    run's update and random masks; the drift ratios and module kinds. The excess: Pass@1 the
    sparsified update keeps beyond Gaussian geometry's share of the whole update's change, (top -
    base) - g (full - base), a difference (the kept share's ratio, over a null run's change near 0,
    has no stable interval: shown)."""
    seeds, n = evidence.sparse_seeds, evidence.plan.samples
    pass1 = lambda rows: per_problem(rows, seeds["samples"], 1)  # noqa: E731  (seeds, P)
    full, top = pass1(seeds["full"]), pass1(seeds["top"])
    # (seeds, P) mean over the masks
    blind = np.stack([pass1(masks).mean(0) for masks in seeds["random"]])
    base = np.repeat(pass1([seeds["base"]]), len(full), 0)
    # seed 0's ES, GRPO and null ES models
    es_drift, _, null_drift = evidence.drift["drift"].values()
    gain_kept = lambda m, a="": ((m[a + "top"] - m["base"])  # noqa: E731
                                 / (m[a + "full"] - m["base"]))
    # a null run per seed
    null = {"null_top": pass1(seeds["null_top"]), "null_full": pass1(seeds["null_full"])}
    arrays = {"top": top, "full": full, "base": base, **null}
    gaussian = gaussian_kept_share(seeds["sparsity"])
    excess = lambda m, a="": (m[a + "top"]
                              - m["base"]) - gaussian * (m[a + "full"] - m["base"])  # noqa: E731
    e = {"es_pass1_gain": es_pass1_gain(evidence.runs), "drift_ratio": evidence.drift_ratio,
         "sparsity": seeds["sparsity"],
         "sparse_pass1_change": paired_difference(top, full),
         "sparse_minus_random": paired_difference(top, blind),
         "sparse_gain_kept": interval(gain_kept, arrays), "gaussian_kept": gaussian,
         "null_gain_kept": interval(lambda m: gain_kept(m, "null_"), arrays),
         "sparse_excess": interval(excess, arrays),
         "null_sparse_excess": interval(lambda m: excess(m, "null_"), arrays),
         "sparse_excess_minus_null": interval(lambda m: excess(m) - excess(m, "null_"), arrays),
         "null_pass1_change": paired_difference(null["null_full"], base),
         "null_sparse_pass1_change": paired_difference(null["null_top"], base),
         "null_drift_share": null_drift["total"] / es_drift["total"],
         "kind_drift": {kind: (es_drift[kind], null_drift[kind]) for kind in es_drift
                        if kind not in ("total", "other") and kind in null_drift},
         "es_module_kinds": SeedCount(module_kinds_seeds(evidence.module_kinds["es"], "es")),
         # seed 0's null run
         "null_module_kinds": SeedCount(module_kinds_seeds([null_drift], "es")),
         "grpo_module_kinds": SeedCount(module_kinds_seeds(evidence.module_kinds["grpo"], "grpo"))}
    matched = evidence.matched
    if matched["updates"]:
        e["drift_ratio_matched_pass1"] = evidence.drift_ratio_matched
        e["matched_grpo_updates"] = matched["updates"]
        e["matched_grpo_pass1_gain"] = paired_difference(
            finals_array(matched["finals"], n, 1), finals_array(evidence.runs["es"]["base"], n, 1))
    if evidence.paper_steps:
        e["drift_ratio_paper_steps"] = evidence.paper_steps["drift_ratio"]
        e["paper_steps_lr"] = evidence.paper_steps["lr"]
    return e


def claim5_values(evidence: Evidence) -> dict:
    """Held-out Pass@k after ES and GRPO, and the noise control, against the base
    (forgetting_control)."""
    forgetting, k = evidence.forgetting, evidence.plan.k
    held = lambda name: per_problem(forgetting[name], forgetting["samples"],
                                    k)  # noqa: E731  (seeds, P)
    if not forgetting["families"]:  # every held-out family saturated: nothing to read
        nothing = (float("nan"),) * 3
        return {"k": k, "catastrophic_margin": float("nan")} | {key: nothing for key in (
            "es_heldout_change", "grpo_heldout_change", "noise_heldout_change",
            "es_minus_grpo_heldout", "es_minus_noise_heldout")}
    return {"k": k, "catastrophic_margin": CATASTROPHIC_SHARE * float(held("base").mean()),
            "es_heldout_change": paired_difference(held("es"), held("base")),
            "grpo_heldout_change": paired_difference(held("grpo"), held("base")),
            "noise_heldout_change": paired_difference(held("noise"), held("base")),
            "es_minus_grpo_heldout": paired_difference(held("es"), held("grpo")),
            "es_minus_noise_heldout": paired_difference(held("es"), held("noise"))}


def claim6_values(evidence: Evidence) -> dict:
    """Claim 6's arms against the report's ES runs, seed for seed; the population sweeps, shown."""
    sweep, arms, sizes = evidence.sweep, evidence.arms, evidence.sizes
    pass1_of = lambda row: per_problem([row["correct"]], row["samples"], 1)  # noqa: E731  (1, P)
    e = {"k": evidence.plan.k}
    if sweep:
        by_n = sorted(sweep.values(), key=lambda row: row["population"])
        e["sweep_pass1_small_minus_large"] = paired_difference(
            pass1_of(by_n[0]), pass1_of(by_n[-1]))
    # z-scoring and antithetic: each arm's seeds against the report's ES runs, seed for seed
    if arms:
        n = evidence.runs["es"]["config"]["eval_samples"]
        k = evidence.plan.k
        arm = {name: finals_array(rows, n, 1) for name, rows in arms["rows"].items()}
        arm_k = {name: finals_array(rows, n, k) for name, rows in arms["rows"].items()}
        es, es_k = (finals_array(evidence.runs["es"]["finals"], n, kk) for kk in (1, k))
        e |= {"zscore_pass1_gain": paired_difference(es, arm["raw"]),
              "zscore_passk_gain": paired_difference(es_k, arm_k["raw"]),
              "antithetic_pass1_gain": paired_difference(arm["antithetic"], es),
              "raw_alpha": arms["raw_alpha"],
              "zscore_passk_at_matched_pass1": zscore_at_matched_pass1(
                  evidence.runs["es"], arms["raw_run"], k),
              "raw_path_points": min(map(len, arms["raw_run"]["paths"]))}
    # how much better the smallest population does than the largest, larger minus smaller model
    if sizes:
        def small_and_large(rows):
            by_n = sorted(rows.values(), key=lambda r: r["population"])
            return pass1_of(by_n[0]), pass1_of(by_n[-1])
        smallest, largest = (pick(sizes, key=lambda z: sizes[z]["parameters"])
                             for pick in (min, max))
        (ss, sl), (ls, ll) = (small_and_large(sizes[size]["rows"]) for size in (smallest, largest))
        e["size_population_interaction"] = interval(
            lambda m: (m["ls"] - m["ll"]) - (m["ss"] - m["sl"]),
            {"ss": ss, "sl": sl, "ls": ls, "ll": ll})
        e["size_pretrain_losses"] = (sizes[smallest].get("pretrain_loss"),
                                     sizes[largest].get("pretrain_loss"))
    return e
