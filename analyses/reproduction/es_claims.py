"""Claims 4-6, about ES itself: its drift and where its gain lives (4), no forgetting after it (5),
its population, z-scoring and antithetic sampling (6). Each claim's values read off the evidence
(an interval with what it rests on, a count of seeds, or a number), then its rule: each part a
Condition of verdicts.py, the values shown beside them, and the parts not measured here. No sentence
is made here: the report writer renders the records (parts.py)."""
from __future__ import annotations

import numpy as np

from analyses.paths import finals_array
from analyses.reproduction.evidence import Evidence
from analyses.reproduction.matching import zscore_at_matched_pass1
from analyses.statistics import PAPER_EFFECTS, Interval, interval, paired_difference, per_problem
from analyses.verdicts import (CATASTROPHIC_SHARE, CLAIMS, DRIFT_RATIO, TOLERANCE, Claim,
                               Condition, SeedCount, Shown, at_least, beyond_noise, every_seed,
                               falls, keeps, no_gain, rises)
from analyses.weights import gaussian_kept_share, module_kinds_seeds


def es_pass1_gain(runs: dict) -> Interval:
    """ES's Pass@1 at its end minus the base model's, seed for seed (claims 1 and 4)."""
    es, n = runs["es"], runs["es"]["config"]["eval_samples"]
    return paired_difference(finals_array(es["finals"], n, 1), finals_array(es["base"], n, 1))



# ----------------------------------------------------------------------------- claim 4


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


def claim4(e: dict) -> Claim:
    """ES drifts far: at least DRIFT_RATIO times GRPO's relative L2 drift, at matched Pass@1 gain
    where GRPO was trained to it (per step the two drift as their step sizes do), else at the runs'
    ends. The gain lives in the large coordinates: zeroing the smallest 78% keeps Pass@1 (no fall of
    the margin's size), and the sparsified update keeps more Pass@1 than Gaussian geometry keeps of
    any spread-out signal (gaussian_kept_share; the excess, in Pass@1), more so than the null ES
    runs' sparsified updates do (a run per seed), and more than random masks of the same sparsity.
    The module kinds with the largest drift lead every seed's ranking as the paper's do. A null ES
    run (no signal) drifts as far as ES and ranks the kinds as ES does (the noise is one size on
    every coordinate): shown beside them."""
    matched = "drift_ratio_matched_pass1" in e
    ratio = e["drift_ratio_matched_pass1"] if matched else e["drift_ratio"]
    where = "at matched Pass@1 gain" if matched else "at the runs' ends"
    zeroed = f"{100 * e['sparsity']:.0f}%"
    conditions = (Condition(f"ES drifts at least {DRIFT_RATIO:g}x as far as GRPO ({where}; the "
                            f"paper: about 40x)", at_least, ratio, DRIFT_RATIO, reads="drift"),
                  Condition(f"zeroing the smallest {zeroed} of ES's update keeps Pass@1", keeps,
                            e["sparse_pass1_change"], TOLERANCE),
                  Condition("that update keeps Pass@1 beyond Gaussian geometry's share", rises,
                            e["sparse_excess"], TOLERANCE),
                  Condition("that excess above the null runs'", rises,
                            e["sparse_excess_minus_null"], TOLERANCE),
                  Condition("Pass@1 above random masks' of the same sparsity", rises,
                            e["sparse_minus_random"], TOLERANCE),
                  Condition("ES's largest drift in norms and attention (every seed, not the null "
                            "run)", beyond_noise, e["es_module_kinds"],
                            float(e["null_module_kinds"][0] > 0)),
                  Condition("GRPO's largest drift in embeddings and the LM head (every seed)",
                            every_seed, e["grpo_module_kinds"]))
    shown = ([Shown("the ES/GRPO drift ratio at the runs' ends", e["drift_ratio"], 1)]
             if matched else [])
    if matched:
        shown += [Shown(f"GRPO's Pass@1 gain after {e['matched_grpo_updates']} updates (the "
                        f"matched runs)", e["matched_grpo_pass1_gain"]),
                  Shown("ES's Pass@1 gain", e["es_pass1_gain"])]
    if "drift_ratio_paper_steps" in e:
        shown.append(Shown(f"the drift ratio with GRPO at the paper's per-step ratio (lr "
                           f"{e['paper_steps_lr']:.3g})", e["drift_ratio_paper_steps"], 1))
    shown += [Shown("the null run's drift over ES's (seed 0)", e["null_drift_share"], 2),
              Shown("the null run (seed 0) ranks norms and attention first too (so chance can)",
                    "yes" if e["null_module_kinds"][0] else "no"),
              Shown("the null runs' Pass@1 change", e["null_pass1_change"]),
              Shown(f"the share of ES's Pass@1 gain kept at {zeroed} zeroed",
                    e["sparse_gain_kept"], 2),
              Shown("the share Gaussian geometry keeps of a spread-out signal", e["gaussian_kept"],
                    2),
              Shown("the null runs' excess beyond that share", e["null_sparse_excess"], 4),
              *(Shown(f"relative drift of {kind}, ES / null", f"{es:.3f} / {null:.3f}")
                for kind, (es, null) in e.get("kind_drift", {}).items())]
    return Claim(4, CLAIMS[4], e, conditions, tuple(shown))



# ----------------------------------------------------------------------------- claims 5 and 6


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


def claim5(e: dict) -> Claim:
    """No catastrophic forgetting after ES: held-out Pass@K falls by less than CATASTROPHIC_SHARE of
    the base model's after ES, and ES forgets no more than that beyond the control, the base plus
    signal-free noise the size of ES's update (what an update of that size costs without a signal);
    and, as the paper saw it, held-out Pass@K rose after ES and fell after GRPO."""
    margin, k = e["catastrophic_margin"], e["k"]
    conditions = (Condition(f"held-out Pass@{k} after ES keeps its level (no catastrophic fall)",
                            keeps, e["es_heldout_change"], margin, reads="catastrophic"),
                  Condition("ES forgets no more than a noise control of its update's size", keeps,
                            e["es_minus_noise_heldout"], margin, reads="catastrophic"),
                  Condition(f"held-out Pass@{k} rises after ES", rises, e["es_heldout_change"],
                            TOLERANCE),
                  Condition(f"held-out Pass@{k} falls after GRPO", falls, e["grpo_heldout_change"],
                            TOLERANCE))
    shown = (Shown("the catastrophic margin (a tenth of the base's held-out Pass@K)", margin),
             Shown("the noise control minus the base", e["noise_heldout_change"]),
             Shown("ES minus GRPO, held out", e["es_minus_grpo_heldout"]))
    return Claim(5, CLAIMS[5], e, conditions, shown)


SIZES_OUT_OF_SCOPE = ("larger models need smaller populations",
                      "out of scope at this scale: the paper's models "
                      "have 0.5B-7B parameters, these 0.1M-3M, and a cell (a population on a "
                      "model) is one run")


def claim6_values(evidence: Evidence) -> dict:
    """Claim 6's arms against the report's ES runs, seed for seed; the population sweeps, shown."""
    sweep, arms, sizes = evidence.sweep, evidence.arms, evidence.sizes
    pass1_of = lambda row: per_problem([row["correct"]], row["samples"], 1)  # noqa: E731  (1, P)

    def small_and_large(rows: dict) -> tuple:  # Pass@1 of the smallest population, the largest's
        by_n = sorted(rows.values(), key=lambda row: row["population"])
        return pass1_of(by_n[0]), pass1_of(by_n[-1])
    e = {"k": evidence.plan.k}
    if sweep:
        e["sweep_pass1_small_minus_large"] = paired_difference(*small_and_large(sweep))
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
        smallest, largest = (pick(sizes, key=lambda z: sizes[z]["parameters"])
                             for pick in (min, max))
        (ss, sl), (ls, ll) = (small_and_large(sizes[size]["rows"]) for size in (smallest, largest))
        e["size_population_interaction"] = interval(
            lambda m: (m["ls"] - m["ll"]) - (m["ss"] - m["sl"]),
            {"ss": ss, "sl": sl, "ls": ls, "ll": ll})
        e["size_pretrain_losses"] = (sizes[smallest].get("pretrain_loss"),
                                     sizes[largest].get("pretrain_loss"))
    return e


def claim6(e: dict) -> Claim:
    """Z-scoring helps: at matched Pass@1, z-scored ES keeps more Pass@K than raw rewards (the raw
    runs' alpha chosen on dev); antithetic sampling gives no Pass@1 benefit. Population against
    model size is out of scope at this scale: the sweep is shown."""
    shown = []
    if "sweep_pass1_small_minus_large" in e:
        shown.append(Shown("ES populations at equal sequences, Pass@1 of the smallest minus the "
                           "largest (one seed)", e["sweep_pass1_small_minus_large"]))
    if "size_population_interaction" in e:
        shown.append(Shown("that difference on the largest model minus on the smallest (one run a "
                           "cell)", e["size_population_interaction"]))
        small_loss, large_loss = e.get("size_pretrain_losses", (None, None))
        if small_loss is not None and large_loss is not None:
            shown.append(Shown("pretraining loss, smallest / largest model",
                               f"{small_loss:.3f} / {large_loss:.3f}"))
    if "zscore_pass1_gain" not in e:  # its runs not trained (eval.py reproduce --parts ...,claim6)
        return Claim(6, CLAIMS[6], e, (), tuple(shown), (SIZES_OUT_OF_SCOPE, (
            "z-scoring helps; antithetic sampling does not",
            "its runs not trained (--parts claim6)")))
    k = e["k"]
    conditions = (Condition(f"z-scoring's Pass@{k} above raw rewards' at matched Pass@1", rises,
                            e["zscore_passk_at_matched_pass1"], TOLERANCE,
                            PAPER_EFFECTS["passk_es_minus_grpo"]),
                  Condition("antithetic sampling gains no Pass@1", no_gain,
                            e["antithetic_pass1_gain"], TOLERANCE))
    points = e.get("raw_path_points", 2)
    shown += [Shown("the raw runs' alpha (chosen on dev) and path points",
                    f"{e['raw_alpha']:g}, {points} points"
                    + (" (a line from the base to the end)" if points <= 2 else "")),
              Shown("z-scored minus raw at their ends, Pass@1", e["zscore_pass1_gain"]),
              Shown(f"z-scored minus raw at their ends, Pass@{k}", e["zscore_passk_gain"])]
    return Claim(6, CLAIMS[6], e, conditions, tuple(shown), (SIZES_OUT_OF_SCOPE,))
