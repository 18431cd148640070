"""The real model's power plan (analyses/reproduction/pilot.py): the Pass@k estimator's sampling
variance, the problems a difference needs, and `eval.py pilot` end to end on the tiny model (the
real model's run: report/smollm2-add-gpu)."""
import json
import math

import numpy as np
import pytest

import eval as cli
from analyses.reproduction import pilot
from es_grpo import pass_at_k


@pytest.mark.parametrize("p", [0.0, 0.05, 0.3, 0.9])
def test_the_estimators_variance_is_the_binomials_at_k_1_and_the_indicators_at_k_n(p):
    n = 64
    assert pilot.estimator_variance(n, 1, p) == pytest.approx(p * (1 - p) / n, abs=1e-12)
    solved = 1 - (1 - p) ** n  # Pass@n's estimator is 1 when any sample is right
    assert pilot.estimator_variance(n, n, p) == pytest.approx(solved * (1 - solved), abs=1e-12)


def test_the_estimators_variance_matches_a_simulation():
    rng, n, k, p = np.random.default_rng(0), 64, 16, 0.04
    draws = [pass_at_k(n, int(c), k) for c in rng.binomial(n, p, 20000)]
    assert pilot.estimator_variance(n, k, p) == pytest.approx(np.var(draws), rel=0.05)


def test_the_problems_needed_are_the_fewest_at_which_sampling_lets_the_effect_be_detected():
    correct = [0, 1, 3, 10, 30, 64, 0, 2]
    for k, effect in ((1, 0.005), (32, 0.01), (32, 0.05)):
        variance = pilot.difference_variance(correct, 64, k)  # sampling's, of a difference
        needed = pilot.fewest_problems(variance, effect)
        assert pilot.Z_POWER * math.sqrt(variance / needed) <= effect
        assert needed == 1 or pilot.Z_POWER * math.sqrt(variance / (needed - 1)) > effect
    variance = pilot.difference_variance(correct, 64, 32)
    assert pilot.fewest_problems(variance, 0.01) > 4 * pilot.fewest_problems(variance, 0.02) - 4


def test_entropys_sampling_variance_matches_a_simulation():
    """Two models of one spread, each sampled on the same problems: the variance of their token
    entropies' difference, simulated, is what the pilot's samples predict at another count of
    samples; read unpaired it is larger (the problems differ), and a family with no spread within
    problems predicts none."""
    rng, problems, pilot_n, n = np.random.default_rng(0), 40, 64, 16
    # each problem's own
    level, tokens = rng.uniform(0.5, 2.0, problems), rng.integers(10, 60, problems)

    def sampled(samples):  # (problems, samples): entropy sums and tokens, both varying by sample
        lengths = np.maximum(1, rng.poisson(tokens[:, None], (problems, samples)))
        return lengths * (level[:, None] + rng.normal(0, 0.3, (problems, samples))), lengths

    def entropy(samples):
        sums, lengths = sampled(samples)
        return sums.sum() / lengths.sum()
    sums, lengths = sampled(pilot_n)
    family = {"sample_entropy_sums": sums.tolist(), "sample_lengths": lengths.tolist()}
    differences = [entropy(n) - entropy(n) for _ in range(4000)]
    predicted = pilot.entropy_difference_variance(family, n) / problems
    assert predicted == pytest.approx(np.var(differences), rel=0.1)
    assert pilot.unpaired_entropy_variance(family,
                                           n) > 5 * pilot.entropy_difference_variance(family, n)
    assert pilot.base_entropy(family) == pytest.approx(sums.sum() / lengths.sum())
    flat = {"sample_entropy_sums": (lengths * 1.5).tolist(), "sample_lengths": lengths.tolist()}
    assert pilot.entropy_difference_variance(flat, n) == pytest.approx(0, abs=1e-20)


def test_the_pilot_command_measures_reuses_and_plans(tmp_path):
    """On the tiny model: the base's counts and each sample's entropy on dev problems, an update's
    seconds, POWER.md's table; run again with the same settings it reuses the evaluation (a changed
    count there says so) and the update's seconds, which a changed update shape (--quick) measures
    again; a pilot saved without each sample's entropy is measured again."""
    flags = ["--model", "tiny", "--eval-split", "dev", "--eval-problems", "3",
             "--heldout-problems", "2", "--eval-samples", "32", "--heldout", "add",
             "--max-new-tokens", "12", "--rollout-batch", "32", "--out", str(tmp_path)]
    first = cli.main(["pilot", *flags])
    family = first["families"]["countdown"]
    assert first["task"] == "countdown" and len(family["correct"]) == 3
    assert ([len(row) for row in family["sample_lengths"]] == [32] * 3
            == [len(r) for r in family["sample_entropy_sums"]])
    assert 0 < pilot.base_entropy(family) and 0 < pilot.entropy_difference_variance(family, 32)
    held = first["families"]["add"]["correct"]
    # [32, 32] marks a reuse
    assert len(held) == 2 and all(0 <= c <= 32 for c in held) and held != [32, 32]
    assert set(first["updates"]["seconds"]) == {"es_update", "grpo_step"}
    saved = json.loads((tmp_path / "pilot.json").read_text())
    saved["families"]["add"]["correct"] = [32, 32]
    saved["updates"]["seconds"]["es_update"] = 12345.0
    (tmp_path / "pilot.json").write_text(json.dumps(saved))
    again = cli.main(["pilot", *flags])
    assert (again["families"]["add"]["correct"] == [32, 32]
            and again["updates"]["seconds"]["es_update"] == 12345.0)
    table = (tmp_path / "POWER.md").read_text()
    assert "GRPO's entropy falls" in table and "python eval.py pilot --model tiny" in table
    assert not math.isnan(first["families"]["countdown"]["seconds_per_row"])
    quick = cli.main(["pilot", *flags, "--quick"])
    assert (quick["families"]["add"]["correct"] == [32, 32]
            and quick["updates"]["seconds"]["es_update"] != 12345.0)
    del saved["families"]["add"]["sample_lengths"]
    (tmp_path / "pilot.json").write_text(json.dumps(saved))
    # measured again, as at first
    assert cli.main(["pilot", *flags])["families"]["add"]["correct"] == held
