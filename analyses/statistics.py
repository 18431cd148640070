"""Intervals and verdict words. Every verdict of the report is read off 95% intervals (interval()), over
problems and seeds, with one set of margins for all claims; each interval says what it rests on and the
smallest effect its test can detect."""
from __future__ import annotations

import numpy as np

import es_grpo

# The paper's effects (PAPER.md, its headline: Qwen2.5-1.5B, easy setting; Pass@1 and Pass@32 as fractions):
# what a test here should be able to see, stated beside each verdict's smallest detectable effect.
PAPER_EFFECTS = {"es_pass1_gain": 0.005, "es_passk_change": 0.007, "passk_es_minus_grpo": 0.010,
                 "grpo_pass1_gain": 0.019}
# One margin for every claim: half the paper's smallest Pass@K effect (ES's Pass@32 gain), so that neither
# "keeps X" (the change in X above -TOLERANCE with 95% confidence) nor "equivalent" hides an effect of the
# paper's size.
TOLERANCE = PAPER_EFFECTS["es_passk_change"] / 2
RATIO_BAND = (0.5, 2.0)  # "about equal" for ratios: within a factor of 2
DRAWS = 1000


def per_problem(correct, n: int, k: int) -> np.ndarray:
    """Unbiased Pass@k of each problem from its count of correct answers among n samples: (P,) from one
    model's counts, (models, P) from a list of them (one model per seed, say)."""
    counts = np.asarray(correct, dtype=int)
    return np.array([es_grpo.pass_at_k(n, int(c), k) for c in counts.ravel()], dtype=float).reshape(counts.shape)


def per_model(values, problems: int) -> np.ndarray:
    """A number per model (entropy: (..., seeds)) as interval() takes per-problem arrays, (..., seeds, P): the same
    on every problem, so that its interval rests on the seeds."""
    return np.repeat(np.asarray(values, dtype=float)[..., None], problems, -1)


# Student's t quantiles, two-sided 95% (0.975) and 80% power (0.80), by degrees of freedom; larger df: normal.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
T_80 = (1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868,
        0.866, 0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855, 0.855,
        0.854, 0.854)


def t_quantile(table: tuple, df: int, normal: float) -> float:
    return table[df - 1] if 1 <= df <= len(table) else normal


class Interval(tuple):
    """(estimate, low, high), a 95% interval, and what it rests on: `se`, `df` (seeds - 1; 0: problems only),
    `dropped` (the share of problem draws where the statistic was undefined) and `detectable` (the smallest
    effect a two-sided 5% test of this se finds with 80% power: (t_0.975 + t_0.80) x se)."""

    def __new__(cls, estimate: float, se: float, df: int, dropped: float):
        half = t_quantile(T_975, df, 1.960) * se
        self = super().__new__(cls, (estimate, estimate - half, estimate + half))
        self.se, self.df, self.dropped = se, df, dropped
        self.detectable = (t_quantile(T_975, df, 1.960) + t_quantile(T_80, df, 0.842)) * se
        return self


def interval(statistic, data: dict[str, np.ndarray], draws: int = DRAWS, seed: int = 0) -> Interval:
    """statistic(means) with a 95% interval for a crossed design (the same problems for every seed and model):
    se^2 = the variance over a bootstrap of the problems (every seed kept, the same draw for every array) plus
    the leave-one-seed-out jackknife variance, and a t quantile with seeds - 1 degrees of freedom (right for
    few seeds, where a percentile bootstrap over 3 seeds covers about 73%: test_eval.py simulates both). One
    seed: the problems' part only, normal quantile. data: arrays (..., seeds, problems) over one problem set;
    statistic maps {name: means (draws, ...)} to (draws,)."""
    seeds, problems = next(iter(data.values())).shape[-2:]
    pick = np.random.default_rng(seed).integers(problems, size=(draws, problems))

    def means(array, keep=slice(None), draw=False):  # (..., S, P) -> (draws, ...) or (1, ...)
        array = np.moveaxis(array, (-2, -1), (0, 1))[keep]  # (S', P, ...)
        return array[:, pick].mean((0, 2)) if draw else array.mean((0, 1))[None]

    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = float(statistic({key: means(value) for key, value in data.items()})[0])
        values = np.asarray(statistic({key: means(value, draw=True) for key, value in data.items()}), dtype=float)
        finite = values[np.isfinite(values)]
        over_problems = float(np.var(finite, ddof=1)) if len(finite) > 1 else float("nan")
        left_out = np.array([float(statistic({key: means(value, np.arange(seeds) != s)
                                              for key, value in data.items()})[0])
                             for s in range(seeds if seeds > 1 else 0)])
    left_out = left_out[np.isfinite(left_out)]  # a seed whose absence leaves the statistic undefined: left out
    over_seeds = (seeds - 1) / seeds * float(np.sum((left_out - left_out.mean()) ** 2)) if len(left_out) > 1 else 0.0
    variance = over_problems + over_seeds
    # Welch-Satterthwaite: the seeds' part has seeds - 1 degrees of freedom, the problems' part problems - 1
    df = variance ** 2 / (over_seeds ** 2 / max(seeds - 1, 1) + over_problems ** 2 / max(problems - 1, 1)) \
        if variance > 0 else 0
    return Interval(estimate, variance ** 0.5, int(df) if np.isfinite(df) else 0, 1 - len(finite) / draws)


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple:
    return interval(lambda m: m["a"] - m["b"], {"a": a, "b": b})


def saved_interval(row: dict, key: str) -> Interval:
    """The Interval diversity_row saved as KEY, KEY_error."""
    return Interval(row[key], *row[key + "_error"])


def equivalent(ci, margin: float) -> bool:
    """The whole interval inside (-margin, margin): an effect, if any, smaller than the margin."""
    return -margin < ci[1] and ci[2] < margin


def rises(ci) -> bool | None:
    """True if the interval is above 0, False if it is not above 0 at all, None (inconclusive) otherwise."""
    return True if ci[1] > 0 else False if ci[2] <= 0 else None


def falls(ci) -> bool | None:
    return True if ci[2] < 0 else False if ci[1] >= 0 else None


def at_least(ci, level: float) -> bool | None:
    """True if the whole interval is at or above level, False if the whole of it is below."""
    return True if ci[1] >= level else False if ci[2] < level else None


def keeps(ci) -> bool | None:
    return True if ci[1] >= -TOLERANCE else False if ci[2] < -TOLERANCE else None


def within(ci, band) -> bool | None:
    return True if band[0] <= ci[1] and ci[2] <= band[1] else False if ci[2] < band[0] or ci[1] > band[1] else None


def helps(first, second) -> bool | None:
    """A change that raises one of two measures (Pass@1, Pass@K) and lowers neither: True; False if it raises
    neither (both intervals wholly at or below 0); else None."""
    up, down = (rises(first), rises(second)), (falls(first), falls(second))
    if True in up and True not in down:
        return True
    return False if up == (False, False) else None


def no_gain(ci) -> bool | None:
    """"X gives no benefit": True if the interval's upper end is below TOLERANCE, False if it is above 0."""
    return True if ci[2] < TOLERANCE else False if ci[1] > 0 else None


def rises_or_equivalent(ci, margin: float = TOLERANCE) -> bool | str | None:
    """rises(), except that an interval wholly inside (-margin, margin) is "equivalent": no effect of the
    margin's size, which is a finding, not a failure to decide."""
    return "equivalent" if equivalent(ci, margin) else rises(ci)


def verdict(*conditions) -> str:
    """Every condition met: reproduced; one clearly failed: not reproduced; else, one found equivalent (no
    effect of the margin's size): equivalent; else inconclusive."""
    if all(c is True for c in conditions):
        return "reproduced"
    if any(c is False for c in conditions):
        return "not reproduced"
    return "equivalent" if "equivalent" in conditions else "inconclusive"


def detectable(ci) -> str:
    """The smallest effect the interval's test detects with 80% power ("-" where unknown)."""
    value = getattr(ci, "detectable", float("nan"))
    return f"{value:.3f}" if np.isfinite(value) else "-"


def power(ci, effect: str) -> str:
    """The smallest effect the interval's test detects (80% power) beside the paper's effect of that kind."""
    return f"detectable {detectable(ci)}, the paper's effect {PAPER_EFFECTS[effect]:.3f}"


def shown(ci, digits: int = 3) -> str:
    """The estimate and its interval; "-" where there is no estimate (a level a path never reaches), and the
    share of problem draws where the statistic was undefined, if any (they are left out of its se)."""
    if not np.isfinite(ci[0]):
        return "-"
    dropped = getattr(ci, "dropped", 0.0)
    return f"{ci[0]:+.{digits}f} [{ci[1]:+.{digits}f}, {ci[2]:+.{digits}f}]" + (
        f" ({dropped:.0%} of draws undefined)" if dropped > 0 else "")


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else f"{values[0]:.3f}"
