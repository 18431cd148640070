"""The paper's six claims judged (judge): claims 1-3 here, ES against GRPO on the runs' paths;
claims 4-6, about ES itself, in es_claims.py. Each claim's values read off the evidence (an
interval with what it rests on, a count of seeds, or a number), then its rule: each part as the
paper states it (a Condition of verdicts.py: its test, its fixed margin, its outcome), the values
shown beside them as context (Shown: in no verdict) and the parts not measured here, each with why.
No sentence is made here: the report writer renders the records (parts.py). tests/test_verdicts.py
feeds the rules hand-made numbers."""
from __future__ import annotations

import numpy as np

from analyses.paths import end_of, finals_array, matched_entropy, path_arrays
from analyses.reproduction.es_claims import (claim4, claim4_values, claim5, claim5_values, claim6,
                                             claim6_values, es_pass1_gain)
from analyses.reproduction.evidence import Evidence
from analyses.reproduction.matching import claim1_matched_values, frontier_values
from analyses.statistics import (PAPER_EFFECTS, Interval, combined, entropy_change,
                                 paired_difference, saved_interval)
from analyses.verdicts import (CLAIMS, COLLAPSE, ENTROPY_MARGIN_SHARE, EXPLAINED_SHARE, TOLERANCE,
                               Claim, Condition, Shown, falls, falls_by, keeps, rises)

SATURATION = 0.95  # a Pass@1 this high leaves a model no room to show a loss of coverage


# ----------------------------------------------------------------------------- claim 1


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


def frontier_rates(e: dict) -> list[str]:
    return sorted(key[len("frontier_entropy_"):] for key in e
                  if key.startswith("frontier_entropy_"))


def claim1(e: dict) -> Claim:
    """Each part of claim 1 as the paper states it: ES raises Pass@1 and keeps Pass@K (no fall
    beyond the margin); GRPO raises Pass@1 more than ES at matched sequences; GRPO's token entropy
    collapses (at its end, a fall of at least COLLAPSE of the base's); its Pass@K falls below the
    base's; and ES's Pass@K lies above GRPO's at matched Pass@1 (the trade-off: at each ES rate's
    Pass@1, above the best of GRPO's paths over every learning rate, frontier_values; without those
    runs, GRPO's calibrated path or the models trained to ES's Pass@1). Entropy at matched Pass@1 is
    context: shown."""
    k = e["k"]
    rates = frontier_rates(e)
    passk_effect = PAPER_EFFECTS["passk_es_minus_grpo"]
    conditions = [Condition("ES raises Pass@1 over the base", rises, e["es_pass1_gain"], TOLERANCE,
                            PAPER_EFFECTS["es_pass1_gain"]),
                  Condition(f"ES keeps Pass@{k} (no fall of the margin's size)", keeps,
                            e["es_passk_change"], TOLERANCE)]
    unmeasured = []
    if "grpo_minus_es_pass1_at_sequences" in e:
        conditions.append(Condition("GRPO raises Pass@1 more than ES (at GRPO's sequences)", rises,
                                    e["grpo_minus_es_pass1_at_sequences"], TOLERANCE,
                                    PAPER_EFFECTS["grpo_minus_es_pass1"]))
    else:
        unmeasured.append(("GRPO raises Pass@1 more than ES", "no ES path at GRPO's sequences"))
    conditions += [Condition("GRPO's token entropy collapses (at its end, at most half the base's)",
                             falls_by, e["grpo_entropy_relative_change"], COLLAPSE,
                             reads="collapse"),
                   Condition(f"GRPO's Pass@{k} falls below the base's (at its end)", falls,
                             e["grpo_passk_change"], TOLERANCE)]
    if rates:
        conditions += [Condition(f"ES's Pass@{k} above GRPO's at matched Pass@1 ({rate}; GRPO's "
                                 f"frontier)", rises,
                                 e[f"frontier_passk_{rate}"], TOLERANCE,
                                 passk_effect) for rate in rates]
    else:
        conditions.append(Condition(f"ES's Pass@{k} above GRPO's at matched Pass@1", rises,
                                    es_passk_advantage(e), TOLERANCE, passk_effect))
    return Claim(1, CLAIMS[1], e, tuple(conditions), claim1_shown(e, rates), tuple(unmeasured))


def claim1_shown(e: dict, rates: list[str]) -> tuple[Shown, ...]:
    k, shown = e["k"], []
    shown += [Shown(f"ES's token entropy minus GRPO's frontier at its Pass@1 ({rate}), nats",
                    e[f"frontier_entropy_{rate}"], 4) for rate in rates]
    shown += [Shown(f"GRPO's token entropy at its end relative to the base ({name}, "
                    f"{e['frontier_updates'][name]} updates)", e[key], 2)
              for name, key in ((key[len("entropy_fall_"):], key) for key in e
                                if key.startswith("entropy_fall_"))]
    shown += [Shown("ES's token entropy minus GRPO's where GRPO's calibrated path reaches ES's "
                    "Pass@1, nats", e["entropy_es_minus_grpo_at_es_pass1"], 4),
              Shown("the entropy margin of that comparison, nats (a twentieth of the base's)",
                    e["entropy_margin"], 3),
              Shown("GRPO's token entropy there relative to the base",
                    e["grpo_entropy_relative_change_at_es_pass1"]),
              Shown("GRPO's Pass@1 at its end minus the base's", e["grpo_pass1_change"]),
              Shown(f"ES's Pass@{k} minus GRPO's calibrated path at ES's Pass@1",
                    e["passk_es_minus_grpo_at_es_pass1"])]
    if "passk_es_minus_grpo_matched_models" in e:
        low, high = e["matched_updates_range"]
        shown += [Shown(f"ES's Pass@{k} minus the GRPO models trained to its Pass@1 "
                        f"({e['matched_grpo_updates']} "
                        f"updates), adjusted by {e['matched_slope']:.2f} x the Pass@1 mismatch",
                        e["passk_es_minus_grpo_matched_models"]),
                  Shown("their Pass@1 mismatch (ES minus them)", e["matched_pass1_mismatch"]),
                  Shown("updates at which GRPO's path reaches ES's Pass@1, over bootstrap draws",
                        f"{low:.0f} to {high:.0f}")]
    return tuple(shown)



# ----------------------------------------------------------------------------- claims 2 and 3


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
            "js_part_minus_explained_share": combined(js_part, advantage, EXPLAINED_SHARE)}


def claim2(e: dict) -> Claim:
    """The population's coverage beyond one policy of its mean success (the JS part) must be there,
    read from the counts alone (unbiased whatever the members' rates: tests/test_diversity.py draws
    them from families other than the rate model's); the trained ES model must have the higher
    Pass@K it is to explain (above GRPO's at ES's Pass@1, claim 1's); and the JS part must explain
    it: be at least EXPLAINED_SHARE of it (the JS part minus that share of the advantage above 0).
    The JS part is measured around the base model on one population drawn: like one seed, it decides
    nothing alone. The formula's ratio is shown: a check of its approximation. Measured at the
    evaluation's temperature: ES trains greedy, where a member's success on a problem is 0 or 1 and
    JS_succ is no longer about rates."""
    k, passk_effect = e["k"], PAPER_EFFECTS["passk_es_minus_grpo"]
    conditions = (Condition("the population's JS part (coverage beyond one policy of its mean "
                            "success) is there",
                            rises, e["diversity_js_gain_counts"], TOLERANCE,
                            PAPER_EFFECTS["es_passk_change"]),
                  Condition(f"ES's Pass@{k} above GRPO's at its Pass@1 (what the JS part is to "
                            f"explain)", rises, e["es_passk_advantage"], TOLERANCE, passk_effect),
                  Condition(f"the JS part explains it: at least {EXPLAINED_SHARE:g} of that "
                            f"advantage (the JS part "
                            "minus that share)", rises, e["js_part_minus_explained_share"],
                            reads="explained"))
    shown = (Shown("the rate model's JS part", e["diversity_js_gain"], 4),
             Shown("the formula's predicted / measured JS part (a check of its approximation)",
                   e["diversity_ratio"], 2),
             Shown("the mean policy minus the centre (not diversity)",
                   e["diversity_mean_policy_gain"], 4),
             Shown("the population minus the centre", e["population_gain_vs_centre"], 4),
             Shown("JS_pol, nats (no interval)", e["js_pol"], 4))
    return Claim(2, CLAIMS[2], e, conditions, shown,
                 (("the advantage tracks JS_succ along training",
                   "the population's counts at every path point "
                   "of every ES seed: the power plan's hours"),))


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


def claim3(e: dict) -> Claim:
    """GRPO->ES keeps GRPO's Pass@1 (against GRPO alone at equal updates: the same total budget) and
    ES's Pass@K (against ES alone at equal sequences), and so lies above GRPO's path: where GRPO's
    path reaches GRPO->ES's Pass@1, GRPO->ES has the higher Pass@K."""
    k = e["k"]
    conditions = (Condition("GRPO->ES keeps GRPO's Pass@1 (at equal updates)", keeps,
                            e["grpo_es_pass1_minus_grpo"], TOLERANCE),
                  Condition(f"GRPO->ES keeps ES's Pass@{k} (at equal sequences)", keeps,
                            e["grpo_es_passk_minus_es"], TOLERANCE),
                  Condition(f"GRPO->ES's Pass@{k} above GRPO's at its Pass@1", rises,
                            e["grpo_es_passk_minus_grpo_at_pass1"], TOLERANCE,
                            PAPER_EFFECTS["passk_es_minus_grpo"]))
    return Claim(3, CLAIMS[3], e, conditions,
                 (Shown("GRPO->ES's Pass@1 minus ES alone's (at equal sequences)",
                        e["grpo_es_pass1_minus_es"]),))



RULES = (claim1, claim2, claim3, claim4, claim5, claim6)


def judge(evidence: Evidence) -> list[Claim]:
    """The six claims, each read off its own values (claim 2's advantage is claim 1's)."""
    first = claim1_values(evidence.runs, evidence.rows, evidence.frontier, evidence.plan.k,
                          evidence.matched)
    values = (first, claim2_values(evidence, first), *(read(evidence) for read in (
        claim3_values, claim4_values, claim5_values, claim6_values)))
    return [rule(value) for rule, value in zip(RULES, values)]
