"""The paper's analyses, in layers that import one way only (tests/test_architecture.py reads the
imports):

    eval.py (the commands)
      -> reproduction/trajectories.py (runs stopped at a deadline, read off their trajectory
         points: the real model's report, report/smollm2-add-gpu/REPORT.md, by claim 1's rule)
      -> reproduction/report.py (REPORT.md, report.json) -> figures.py (every plot and table),
         reproduction/scaling.py (a larger model's report beside the tiny model's),
         reproduction/parts.py (the claims' parts rendered: the opening table, the fixed margins),
         reproduction/costs.py (what the runs cost: budgets, wall times, the power plan),
         reproduction/montecarlo.py (the outcomes judged again under other bootstrap seeds)
      -> reproduction/claims.py (claims 1-3 and the judge of all six: each claim's values read
         off the evidence, then its parts as the paper states them, each a Condition, and what it
         shows beside them: records, no sentences)
      -> reproduction/es_claims.py (claims 4-6, about ES itself, alike)
      -> reproduction/matching.py (the comparisons at matched Pass@1 of claims 1, 2 and 6)
      -> reproduction/evidence.py (everything measured, once) -> reproduction/plan.py (the runs),
         reproduction/pilot.py (a real model's power plan, from the base model on dev problems)
      -> reproduction/reuse.py (saved analyses, keyed on version, arguments and models)
      -> measurements: weights.py, diversity.py, forgetting.py, paths.py, training.py,
         verifier_cases.py
      -> evaluation.py (load, evaluate), verdicts.py (the parts' tests, margins fixed in
         report/PREREGISTRATION.json, verdict words), statistics.py (intervals)
      -> scale/, es_grpo.py

Where each claim of the paper (arXiv 2608.27351) is measured and judged (claims 1-3 by
reproduction/claims.py, 4-6 by reproduction/es_claims.py):

    claim                                 measured in  by                             judged by
    1 ES raises Pass@1, keeps Pass@K;     paths        comparisons, matched_entropy;  claim1
      GRPO's entropy falls                training     grpo_at_gain (GRPO to ES's
                                                       Pass@1)
    2 the population's JS diversity       diversity    population_diversity,          claim2
      explains its higher Pass@K                       diversity_statistics
    3 GRPO->ES combines both              paths        comparisons                    claim3
    4 ES drifts far; its gain is sparse   weights      drifts, sparse_over_seeds,     claim4
                                                       gaussian_kept_share
    5 no forgetting after ES              forgetting   forgetting_control             claim5
    6 population by model size;           training     size_sweeps,                   claim6
      z-scoring; antithetic sampling                   hyperparameter_arms

Intervals for all six: statistics.py (interval); tests, margins and verdict words: verdicts.py.

Adding a part to a claim touches four files at most; everything after its Condition is generic
(REPORT.md's table, margin words and outcomes, the power plan, the verdicts it can reach, the
bootstrap's check, report.json):
  1. The measurement, where the part needs a number not measured yet: a function of the
     measurements' layer from what the evidence already holds (a run's counts and paths, as
     paths.load_runs and trajectories.stopped_run give them) to an interval (statistics.interval).
     A matched comparison is a row of paths.comparisons, which both the end-of-run report and the
     trajectories report read.
  2. The claim's definition: its values function (claim1_values, ... in reproduction/claims.py for
     claims 1-3, reproduction/es_claims.py for 4-6) names the value, and its rule adds the part, a
     Condition(part, test, value, margin).
  3. The margin, where the part needs one of its own (a Pass@K or Pass@1 difference reads
     verdicts.TOLERANCE, fixed already): an entry of report/PREREGISTRATION.json's "margins",
     dated, with the data seen when it was set; the rule reads verdicts.MARGINS[name] and says
     reads=name.
  4. The test: tests/test_verdicts.py's hand-made numbers hold the value, and a case in which the
     part alone turns the claim's verdict.
A part that needs something new trained or saved (a run of reproduction/plan.py, an analysis kept
under OUT/analyses) is a new experiment: reproduction/evidence.py gathers it too.
The worked example, tests/test_claims_recipe.py, adds two parts to claim 1 this way in a copy of the
repository and finds them in the trajectories report: "GRPO raises Pass@1 more than ES (at GRPO's
tokens)", a tokens row of paths.comparisons judged at TOLERANCE (analyses/paths.py,
reproduction/claims.py, tests/test_verdicts.py), and "ES keeps its token entropy (at its end, no
fall of a fifth of the base's)", from statistics.entropy_change, at a margin of its own
(reproduction/claims.py, report/PREREGISTRATION.json, tests/test_verdicts.py).
"""
