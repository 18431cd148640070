"""The paper's six claims as records: each part of a claim as the paper states it (a Condition of
verdicts.py: its test, its fixed margin, its outcome), read off the values readings.py takes from
the evidence; the values shown beside them as context (Shown: in no verdict) and the parts not
measured here, each with why. No sentence is made here: the report writer renders the records
(parts.py). judge() returns a Claim per claim; tests/test_verdicts.py feeds the rules hand-made
numbers."""
from __future__ import annotations

import dataclasses

from analyses.reproduction.evidence import Evidence
from analyses.reproduction.readings import (claim1_values, claim2_values, claim3_values,
                                            claim4_values,
                                            claim5_values, claim6_values, es_passk_advantage)
from analyses.statistics import PAPER_EFFECTS
from analyses.verdicts import (COLLAPSE, DRIFT_RATIO, EXPLAINED_SHARE, TOLERANCE, Condition,
                               at_least, beyond_noise,
                               every_seed, falls, falls_by, keeps, no_gain, rises, verdict)

CLAIMS = {1: "ES raises Pass@1 and keeps Pass@K; GRPO raises Pass@1 more, but its entropy "
             "collapses and its Pass@K falls below the base's",
          2: "The ES population's verifier-projected JS diversity explains its higher Pass@K",
          3: "GRPO->ES combines GRPO's Pass@1 with ES's Pass@K",
          4: "ES drifts far (about 40x GRPO), yet its gain lives in a sparse set of large updates; "
             "its largest changes are in norms and attention, GRPO's in embeddings and the LM head",
          5: "No catastrophic forgetting after ES on held-out tasks (their Pass@K rose after ES, "
             "fell after GRPO)",
          6: "Larger models need smaller populations; z-scoring helps; antithetic sampling does "
             "not"}


@dataclasses.dataclass(frozen=True)
class Shown:
    """A value shown beside a claim's scored parts, as context: in no verdict. `value`: an interval,
    a number (shown with `digits`) or a word."""
    name: str
    value: object
    digits: int = 3


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim as the report states it: its values, its scored parts, what it shows beside them and
    the parts of the paper's claim not measured here."""
    number: int
    statement: str
    # name -> (estimate, low, high) or a number: what the parts and the shown values read
    values: dict
    conditions: tuple[Condition, ...]  # the scored parts; none: the claim's runs were not trained
    shown: tuple[Shown, ...] = ()
    unmeasured: tuple[tuple[str, str], ...] = ()  # (part, why not measured here)

    @property
    def verdict(self) -> str:  # a word of verdicts.VERDICTS, or "not measured"
        return verdict(*(c.outcome for c in self.conditions)) if self.conditions else "not measured"


# ----------------------------------------------------------------------------- claim 1


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


# ----------------------------------------------------------------------------- claim 4


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


RULES = (claim1, claim2, claim3, claim4, claim5, claim6)


def judge(evidence: Evidence) -> list[Claim]:
    """The six claims, each read off its own values (claim 2's advantage is claim 1's)."""
    first = claim1_values(evidence.runs, evidence.rows, evidence.frontier, evidence.plan.k,
                          evidence.matched)
    values = (first, claim2_values(evidence, first), *(read(evidence) for read in (
        claim3_values, claim4_values, claim5_values, claim6_values)))
    return [rule(value) for rule, value in zip(RULES, values)]
