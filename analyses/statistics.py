"""Intervals and verdict words. Every verdict of the report is read off 95% intervals (interval()), over
problems and seeds, with one set of margins for all claims; each interval says what it rests on and the
smallest effect its test can detect."""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

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
DRAWS = 1000
NO_SPREAD = 1e-12  # a standard error below this is rounding, not spread: Pass@K, entropy and their changes are O(1)


def per_problem(correct, n: int, k: int) -> np.ndarray:
    """Unbiased Pass@k of each problem from its count of correct answers among n samples: (P,) from one
    model's counts, (models, P) from a list of them (one model per seed, say)."""
    counts = np.asarray(correct, dtype=int)
    return np.array([es_grpo.pass_at_k(n, int(c), k) for c in counts.ravel()], dtype=float).reshape(counts.shape)


def entropy_by_problem(row: dict, problems: int) -> dict[str, np.ndarray]:
    """One evaluation's token entropy as interval() takes it: per problem, the entropy summed over its samples'
    tokens (`entropy_sums`) and those tokens (`entropy_tokens`), (P,) each, both over the mean tokens a problem,
    so that the ratio of their means over problems is the entropy (token_entropy) and a bootstrap of problems
    draws its spread over problems and samples. An evaluation that kept no per-problem sums (made before
    they were kept): its entropy on every problem, tokens 1, so that its interval rests on the seeds alone."""
    sums, tokens = row.get("entropy_sums"), row.get("lengths")
    if sums is None or len(sums) != problems:
        return {"entropy_sums": np.full(problems, np.asarray(row["entropy"], dtype=float)),
                "entropy_tokens": np.ones(problems)}
    scale = float(np.mean(tokens))  # vLLM's entropy is NaN (null): its sums too
    return {"entropy_sums": np.asarray(sums, dtype=float) / scale,
            "entropy_tokens": np.asarray(tokens, dtype=float) / scale}


def entropy_arrays(rows: list[dict], problems: int) -> dict[str, np.ndarray]:
    """entropy_by_problem of one model per row (a seed), (seeds, P) each: the ratio of their means is the mean of
    the seeds' entropies."""
    parts = [entropy_by_problem(row, problems) for row in rows]
    return {key: np.stack([part[key] for part in parts]) for key in ("entropy_sums", "entropy_tokens")}


def entropy_data(name: str, arrays: dict) -> dict[str, np.ndarray]:
    """The two entropy arrays of entropy_arrays (path_arrays, end_of) as interval()'s data, NAME and NAME_tokens."""
    return {name: arrays["entropy_sums"], f"{name}_tokens": arrays["entropy_tokens"]}


def token_entropy(means: dict, name: str) -> np.ndarray:
    """In a statistic of interval(): the token entropy of entropy_data's NAME, per draw."""
    return means[name] / means[f"{name}_tokens"]


def entropy_change(finals: list[dict], base: list[dict], relative: bool = False) -> Interval:
    """A model's token entropy at its end minus the base model's (relative: over it, minus 1), seed for seed,
    with its interval over problems and seeds."""
    problems = len(base[0]["correct"])
    data = entropy_data("a", entropy_arrays(finals, problems)) | entropy_data("b", entropy_arrays(base, problems))
    if relative:
        return interval(lambda m: token_entropy(m, "a") / token_entropy(m, "b") - 1, data)
    return interval(lambda m: token_entropy(m, "a") - token_entropy(m, "b"), data)


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


def informative(ci) -> bool:
    """Whether an interval measured any spread. One that did not (se 0, or rounding's: one seed of a number a
    model, or two models whose samples did not differ on any problem) has seen no variation to measure
    uncertainty by: its width of 0 is not precision, so no condition is decided on it, and shown() says so. A
    bare (estimate, low, high) is taken as given (the rules' tests)."""
    return not getattr(ci, "se", 1.0) <= NO_SPREAD  # an se of NaN: the rules' non-finite case


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


# A condition's outcome: True (it holds), False (it fails: the interval wholly on the wrong side), None
# (undecided), SMALL (real, on the claimed side, but the interval wholly inside the margin) or EQUIVALENT (no
# effect of the margin's size either way: the interval inside (-margin, margin) and across 0).
SMALL, EQUIVALENT = "small", "equivalent"
# Margins besides TOLERANCE (Pass@K, Pass@1), each in its condition's own units and said in REPORT.md:
# token entropy: a twentieth of the base model's (the paper's collapse, after Cui et al., takes 0.65 nats to 0.03,
# a fall of 95%); catastrophic forgetting: a fall of a tenth of the base model's held-out Pass@K (forgetting
# called catastrophic takes an ability to near nothing; a tenth is far short of that).
ENTROPY_MARGIN_SHARE, CATASTROPHIC_SHARE = 0.05, 0.1
VERDICTS = {  # each verdict word, what it means: REPORT.md's header and its table of reachable outcomes
    "reproduced": "every condition holds",
    "small": "every condition holds, and at least one is real but smaller than its margin",
    "partly reproduced": "every condition decided and none fails; some show no effect of their margin's size",
    "equivalent": "every condition shows no effect of its margin's size, with confidence",
    "not reproduced": "a condition fails: its interval wholly on the wrong side",
    "inconclusive": "no condition fails and at least one is undecided"}


def rises(ci, margin: float | None = None) -> bool | str | None:
    """X rises: True if the interval is above 0 (SMALL if, with a margin, it is also wholly below it); False
    if it is wholly below 0, or at or below 0 and wider than the margin; EQUIVALENT if it is inside
    (-margin, margin) across 0; None (undecided) otherwise, and for an interval that measured no spread."""
    low, high = ci[1], ci[2]
    if not (np.isfinite(low) and np.isfinite(high) and informative(ci)):
        return None
    if low > 0:
        return SMALL if margin is not None and high < margin else True
    if high < 0:
        return False
    if margin is not None and -margin < low and high < margin:
        return EQUIVALENT
    return False if high <= 0 else None


def falls(ci, margin: float | None = None) -> bool | str | None:
    return rises((-ci[0], -ci[2], -ci[1]), margin) if informative(ci) else None


def keeps(ci, margin: float = TOLERANCE) -> bool | None:
    """No fall of the margin's size: True if the interval's lower end is above -margin, False if all of it
    is below (None: neither, or no spread measured)."""
    if not informative(ci):
        return None
    return True if ci[1] >= -margin else False if ci[2] < -margin else None


def no_gain(ci, margin: float = TOLERANCE) -> bool | None:
    """"X gives no benefit": True if the interval's upper end is below the margin, False if it is above 0."""
    if not informative(ci):
        return None
    return True if ci[2] < margin else False if ci[1] > 0 else None


def verdict(*outcomes) -> str:
    """A claim's verdict from its conditions' outcomes (VERDICTS says what each word means)."""
    if any(outcome is False for outcome in outcomes):
        return "not reproduced"
    if any(outcome is None for outcome in outcomes):
        return "inconclusive"
    if all(outcome is True for outcome in outcomes):
        return "reproduced"
    if all(outcome == EQUIVALENT for outcome in outcomes):
        return "equivalent"
    return "small" if EQUIVALENT not in outcomes else "partly reproduced"


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition of a claim's rule: `test` (rises, keeps, ...) read off the interval `value`, with a margin
    where one applies; `effect` is the paper's effect of its kind (the power plan's target; None: the margin)."""
    name: str
    test: Callable
    value: tuple
    margin: float | None = None
    effect: float | None = None

    @property
    def outcome(self) -> bool | str | None:
        return self.test(self.value) if self.margin is None else self.test(self.value, self.margin)

    def outcomes(self) -> set:
        """Every outcome the test can give, found by trying it on intervals over a grid around 0 and the margin
        (and on an undefined one): what the data could make of this condition, whatever they are."""
        scale = self.margin if self.margin is not None else 1.0
        points = np.concatenate([-np.logspace(-3, 3, 61), [0.0], np.logspace(-3, 3, 61)]) * scale
        found = {dataclasses.replace(self, value=(float("nan"),) * 3).outcome}
        for low in points:
            for high in points[points >= low]:
                found.add(dataclasses.replace(self, value=((low + high) / 2, low, high)).outcome)
        return found


def reachable(conditions: list[Condition]) -> list[str]:
    """The verdicts a rule of these conditions can reach, in VERDICTS' order: every combination of outcomes."""
    found = {verdict(*combination) for combination in itertools.product(*(c.outcomes() for c in conditions))}
    return [word for word in VERDICTS if word in found]


def seeds_share(ci, seeds: int) -> float:
    """The seeds' share of an interval's variance, read back from its Welch-Satterthwaite degrees of freedom:
    with many problems, df = V^2 / (V_seeds^2 / (seeds - 1)), so V_seeds / V = sqrt((seeds - 1) / df) (0 for
    one seed, where df is 0: problems only)."""
    df = getattr(ci, "df", 0)
    return min(1.0, ((seeds - 1) / df) ** 0.5) if df > 0 and seeds > 1 else 0.0


def seeds_for(ci, target: float, seeds: int, most: int = 200) -> int | None:
    """The fewest seeds, problems and samples as now, at which the interval's test detects `target` with 80%
    power (the seeds' part of the variance shrinks as 1 / seeds, the problems' part stays); None if more
    seeds cannot (the problems' part alone is too large, or more than `most` would be needed) or the interval
    measured no spread."""
    variance = getattr(ci, "se", float("nan")) ** 2
    if not (np.isfinite(variance) and informative(ci) and np.isfinite(target)):
        return None
    if getattr(ci, "detectable", float("inf")) <= target:
        return seeds
    over_seeds = variance * seeds_share(ci, seeds)
    for count in range(max(seeds, 2), most + 1):
        part = over_seeds * seeds / count
        total = part + variance - over_seeds
        df = int(total ** 2 / (part ** 2 / (count - 1))) if part > 0 else 0
        if (t_quantile(T_975, df, 1.960) + t_quantile(T_80, df, 0.842)) * total ** 0.5 <= target:
            return count
    return None


def problems_for(ci, target: float, seeds: int) -> float | None:
    """How many times the problems (or independent samples of them) as now, seeds as now, the interval's test
    needs to detect `target` with 80% power: the problems' part of the variance shrinks as 1 / problems;
    None if the seeds' part alone is too large, or the interval measured no spread."""
    variance = getattr(ci, "se", float("nan")) ** 2
    if not (np.isfinite(variance) and informative(ci) and np.isfinite(target)):
        return None
    over_seeds = variance * seeds_share(ci, seeds)
    room = (target * ci.se / ci.detectable) ** 2 - over_seeds  # the problems' part allowed (its t)
    return max(1.0, (variance - over_seeds) / room) if room > 0 else None


def detectable(ci) -> str:
    """The smallest effect the interval's test detects with 80% power ("-" where unknown: no spread measured)."""
    value = getattr(ci, "detectable", float("nan"))
    return f"{value:.3f}" if np.isfinite(value) and informative(ci) else "-"


def power(ci, effect: str) -> str:
    """The smallest effect the interval's test detects (80% power) beside the paper's effect of that kind."""
    return f"detectable {detectable(ci)}, the paper's effect {PAPER_EFFECTS[effect]:.3f}"


def shown(ci, digits: int = 3) -> str:
    """The estimate and its interval; "-" where there is no estimate (a level a path never reaches), and the
    share of problem draws where the statistic was undefined, if any (they are left out of its se); an interval
    that measured no spread, the estimate alone, said so."""
    if not np.isfinite(ci[0]):
        return "-"
    if not informative(ci):
        return f"{ci[0]:+.{digits}f} (no spread measured)"
    dropped = getattr(ci, "dropped", 0.0)
    return f"{ci[0]:+.{digits}f} [{ci[1]:+.{digits}f}, {ci[2]:+.{digits}f}]" + (
        f" ({dropped:.0%} of draws undefined)" if dropped > 0 else "")


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else f"{values[0]:.3f}"
