"""analyses/statistics.py: the interval over seeds and problems (paired, its coverage with few
seeds, what it rests on and could detect), entropy changes, and the power plan read back from it."""
import json

import numpy as np
import pytest

from analyses import diversity, statistics, verdicts


def test_paired_bootstrap_pairs_problems_resamples_seeds_and_covers_the_mean():
    rng = np.random.default_rng(1)
    a = rng.random((3, 200))
    estimate, low, high = statistics.interval(lambda m: m["a"] - m["b"], {"a": a, "b": a - 0.1})
    # paired: the same problems for both
    assert estimate == pytest.approx(0.1) and high - low < 1e-9
    coin = (rng.random((1, 400)) < 0.3).astype(float)
    estimate, low, high = statistics.interval(lambda m: m["x"], {"x": coin})
    # about 2 x 1.96 x sqrt(0.21 / 400) = 0.09
    assert low < estimate < high and 0.075 < high - low < 0.105
    seeds_apart = np.repeat(np.array([[0.0], [1.0], [2.0]]), 50, axis=1)  # (3 seeds, 50 problems)
    assert np.subtract(*statistics.interval(lambda m: m["x"], {"x": seeds_apart})[2:0:-1]) > 0.5


def percentile_bootstrap(statistic, data, draws=1000, seed=0):
    """The control: (estimate, 2.5%, 97.5%) of a bootstrap resampling seeds and problems alike."""
    seeds, problems = next(iter(data.values())).shape[-2:]
    rng = np.random.default_rng(seed)
    pick_s, pick_p = rng.integers(seeds,
                                  size=(draws,
                                        seeds)), rng.integers(problems, size=(draws, problems))
    values = statistic({key: value[pick_s[:, :, None], pick_p[:, None, :]].mean((1, 2))
                        for key, value in data.items()})
    return (float(statistic({key: value.mean()[None] for key, value in data.items()})[0]),
            *np.percentile(values, [2.5, 97.5]))


def coverage(interval, seeds: int, seed_sd: float, trials: int = 500) -> float:
    """How often interval(statistic, data) holds the true mean 0.5 of a crossed design: seed effects
    N(0, seed_sd), problem effects N(0, 0.1) shared by every seed, noise N(0, 0.1); 100 problems."""
    rng, hits = np.random.default_rng(seeds), 0
    for trial in range(trials):
        data = (0.5 + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, 0.1, (1, 100))
                + rng.normal(0, 0.1, (seeds, 100)))
        ci = interval(lambda m: m["x"], {"x": data}, draws=200, seed=trial)
        hits += ci[1] <= 0.5 <= ci[2]
    return hits / trials


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_seed_and_problem_interval_covers_95_percent_with_few_seeds(seeds):
    """Where seed-to-seed variation matters, a percentile bootstrap over 3 seeds covers far less
    than 95% (the control); the t-based interval with Welch-Satterthwaite degrees of freedom covers
    about 95%."""
    covered = coverage(statistics.interval, seeds, seed_sd=0.06)
    print(f"{seeds} seeds: t-based {covered:.3f}, percentile bootstrap "
          f"{coverage(percentile_bootstrap, seeds, seed_sd=0.06):.3f}")
    assert 0.90 <= covered <= 0.985
    if seeds == 3:
        assert coverage(percentile_bootstrap, seeds, seed_sd=0.06) <= 0.88


def test_an_interval_says_what_it_rests_on_and_what_it_could_detect():
    rng = np.random.default_rng(1)
    data = {"a": 0.5 + rng.normal(0, 0.1, (5, 100)), "b": 0.4 + rng.normal(0, 0.1, (5, 100))}
    ci = statistics.interval(lambda m: m["a"] - m["b"], data)
    assert ci[1] < ci[0] < ci[2] and ci[1] > 0 and 4 <= ci.df and ci.dropped == 0.0
    assert ci.detectable == pytest.approx((statistics.t_quantile(statistics.T_975, ci.df, 1.96)
                                           + statistics.t_quantile(statistics.T_80, ci.df, 0.842))
                                           * ci.se)
    centre = data["a"].mean()
    undefined = statistics.interval(lambda m: np.where(m["a"] >= centre, m["a"], np.nan), data)
    # draws where the statistic has no value are counted, not hidden
    assert 0.2 < undefined.dropped < 0.8
    assert verdicts.rises((0.0, -0.01, 0.01), 0.02) == "absent"
    assert verdicts.rises((0.0, -0.03, 0.01), 0.02) is None
    one = statistics.interval(lambda m: m["a"], {"a": data["a"][:1]})  # one seed: problems only
    assert one.df >= 90 and np.isfinite(one.se)
    assert ("of draws undefined" in statistics.shown(undefined)
            and "undefined" not in statistics.shown(ci))
    saved = json.loads(json.dumps(diversity.diversity_row({"gain": data["a"][0] - data["b"][0], **{
        key: data["a"][0] for key in ("js_succ", "js_succ_plugin", "predicted", "gain_counts",
                                      "mean_policy_gain",
                                      "gain_vs_centre", "population_pass", "mean_policy_pass",
                                      "centre_pass")}})))
    # an analysis read back from disk keeps its se and df
    again = statistics.saved_interval(saved, "gain")
    direct = statistics.interval(lambda m: m["g"], {"g": (data["a"][0] - data["b"][0])[None]})
    assert np.allclose(again, direct) and again.detectable == pytest.approx(direct.detectable)


def evaluations(entropies, rng, problems=80, samples=16) -> list[dict]:
    """One evaluation a seed as es_grpo.evaluate keeps it, at each token entropy of `entropies`: per
    problem, its entropy sum and tokens (lengths differ by problem, each problem's entropy a token
    about the seed's)."""
    rows = []
    for entropy in entropies:
        lengths = rng.integers(5, 40, problems) * samples
        sums = (entropy + rng.normal(0, 0.1, problems)) * lengths
        rows.append({"correct": [0] * problems, "entropy": float(sums.sum() / lengths.sum()),
                     "entropy_sums": sums.tolist(), "lengths": lengths.tolist()})
    return rows


def test_an_entropy_interval_rests_on_the_problems_and_an_interval_of_no_spread_decides_nothing():
    """One seed: a token entropy kept per problem gets an interval over problems, which finds a
    planted fall of 0.1 nats and not a fall where there is none (the control); kept as one number a
    model (evaluations made before), its interval has no spread: it decides nothing and names no
    detectable effect, where the same bare (estimate, low, high) would be read as decided."""
    rng = np.random.default_rng(4)
    base, fallen, same = (evaluations([entropy], rng) for entropy in (1.4, 1.3, 1.4))
    change = statistics.entropy_change(fallen, base)
    # the token-weighted entropies
    assert change[0] == pytest.approx(fallen[0]["entropy"] - base[0]["entropy"])
    assert change.se > 0 and change[1] < change[0] < change[2] and verdicts.falls(change) is True
    assert verdicts.falls(statistics.entropy_change(same, base)) is None
    relative = statistics.entropy_change(fallen, base, relative=True)
    assert relative[0] == pytest.approx(fallen[0]["entropy"] / base[0]["entropy"]
                                        - 1) and relative[2] < 0
    bare = lambda rows: [{"correct": row["correct"],
                          "entropy": row["entropy"]} for row in rows]  # noqa: E731
    blind = statistics.entropy_change(bare(fallen), bare(base))
    assert blind[0] == pytest.approx(change[0]) and not statistics.informative(blind)
    assert statistics.shown(blind) == f"{blind[0]:+.3f} (no spread measured)"
    assert verdicts.falls(blind) is None and verdicts.rises(blind, 0.07) is None
    assert verdicts.keeps(blind) is None and verdicts.no_gain(blind) is None
    assert statistics.detectable(blind) == "-" and statistics.seeds_for(blind, 0.07, 1) is None
    assert verdicts.falls(tuple(blind)) is True  # the control: the bare triple, read as decided
    seeds = statistics.entropy_change(bare(evaluations([1.3, 1.32, 1.28], rng)), bare(base * 3))
    # as one number a model, over seeds: the seeds' spread alone
    assert seeds.se > 0 and seeds.df == 2


def test_the_power_plan_reads_the_seeds_share_back_from_an_interval():
    """seeds_share (from the Welch-Satterthwaite degrees of freedom) against the seeds' part
    measured directly (the same interval over the seeds' per-problem means: its jackknife alone), on
    crossed designs whose seed spread is small, middling and large; seeds_for and problems_for
    answer what a target needs."""
    rng, seeds = np.random.default_rng(3), 5
    difference = lambda m: m["a"] - m["b"]  # noqa: E731
    for seed_sd in (0.005, 0.02, 0.05):
        a = 0.5 + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, 0.2, (seeds, 500))
        b = 0.5 + rng.normal(0, 0.2, (seeds, 500))
        ci = statistics.interval(difference, {"a": a, "b": b})
        direct = statistics.interval(difference,
                                     {"a": a.mean(1, keepdims=True), "b": b.mean(1, keepdims=True)})
        assert statistics.seeds_share(ci,
                                      seeds) == pytest.approx(direct.se ** 2 / ci.se ** 2, abs=0.1)
        # detectable now: no more seeds
        assert statistics.seeds_for(ci, ci.detectable, seeds) == seeds
        wide, narrow = (statistics.seeds_for(ci, ci.detectable * f, seeds) for f in (0.8, 0.6))
        assert wide is not None and (narrow is None or narrow >= wide > seeds)
        more = statistics.problems_for(ci, ci.detectable * 0.9, seeds)
        assert more is None or more > 1.0
