"""Intervals: every part of the report is read off a 95% interval (interval()) over problems and
seeds, which says what it rests on (its seeds, its Monte Carlo error) and the smallest effect its
test can detect; and the power plan's arithmetic. The tests read against the intervals and the
verdicts: verdicts.py."""
from __future__ import annotations

import contextlib
import contextvars
import functools

import numpy as np

import es_grpo

# The paper's effects (PAPER.md, its headline: Qwen2.5-1.5B, easy setting; Pass@1 and Pass@32 as
# fractions):
# what a test here should be able to see, stated beside each verdict's smallest detectable effect.
PAPER_EFFECTS = {"es_pass1_gain": 0.005, "es_passk_change": 0.007, "passk_es_minus_grpo": 0.010,
                 "grpo_pass1_gain": 0.019, "grpo_minus_es_pass1": 0.014}
# bootstrap draws of a statistic that is not affine in the means (an affine one's variance is exact)
DRAWS = 4000
CHUNK = 500  # draws at a time: (chunk, seeds, problems) per array in memory
# a standard error below this is rounding, not spread: Pass@K, entropy and their changes are O(1)
NO_SPREAD = 1e-12
BOOTSTRAP_SEED = contextvars.ContextVar("bootstrap_seed", default=0)


@contextlib.contextmanager
def bootstrap_seed(seed: int):
    """Every interval() inside draws its bootstrap from `seed` (the report's outcomes are checked
    not to move with it: stability())."""
    token = BOOTSTRAP_SEED.set(seed)
    try:
        yield
    finally:
        BOOTSTRAP_SEED.reset(token)


def per_problem(correct, n: int, k: int) -> np.ndarray:
    """Unbiased Pass@k of each problem from its count of correct answers among n samples: (P,) from
    one model's counts, (models, P) from a list of them (one model per seed, say)."""
    counts = np.asarray(correct, dtype=int)
    if counts.size and not 0 <= counts.min() <= counts.max() <= n:
        raise ValueError(f"a count of correct answers outside 0..{n}")
    return pass_at_k_table(n, k)[counts]


@functools.lru_cache(maxsize=256)
def pass_at_k_table(n: int, k: int) -> np.ndarray:
    """es_grpo.pass_at_k(n, c, k) for every count c = 0..n, read by per_problem."""
    table = np.array([es_grpo.pass_at_k(n, c, k) for c in range(n + 1)], dtype=float)
    table.flags.writeable = False  # shared by every caller
    return table


def entropy_by_problem(row: dict, problems: int) -> dict[str, np.ndarray]:
    """One evaluation's token entropy as interval() takes it: per problem, the entropy summed over
    its samples' tokens (`entropy_sums`) and those tokens (`entropy_tokens`), (P,) each, both over
    the mean tokens a problem, so that the ratio of their means over problems is the entropy
    (token_entropy) and a bootstrap of problems draws its spread over problems and samples. An
    evaluation that kept no per-problem sums (made before they were kept): its entropy on every
    problem, tokens 1, so that its interval rests on the seeds alone."""
    sums, tokens = row.get("entropy_sums"), row.get("lengths")
    if sums is None or len(sums) != problems:
        return {"entropy_sums": np.full(problems, np.asarray(row["entropy"], dtype=float)),
                "entropy_tokens": np.ones(problems)}
    scale = float(np.mean(tokens))  # vLLM's entropy is NaN (null): its sums too
    return {"entropy_sums": np.asarray(sums, dtype=float) / scale,
            "entropy_tokens": np.asarray(tokens, dtype=float) / scale}


def entropy_arrays(rows: list[dict], problems: int) -> dict[str, np.ndarray]:
    """entropy_by_problem of one model per row (a seed), (seeds, P) each: the ratio of their means
    is the mean of the seeds' entropies."""
    parts = [entropy_by_problem(row, problems) for row in rows]
    return {key: np.stack([part[key] for part in parts]) for key
            in ("entropy_sums", "entropy_tokens")}


def entropy_data(name: str, arrays: dict) -> dict[str, np.ndarray]:
    """The two entropy arrays of entropy_arrays (path_arrays, end_of) as interval()'s data, NAME and
    NAME_tokens."""
    return {name: arrays["entropy_sums"], f"{name}_tokens": arrays["entropy_tokens"]}


def token_entropy(means: dict, name: str) -> np.ndarray:
    """In a statistic of interval(): the token entropy of entropy_data's NAME, per draw."""
    return means[name] / means[f"{name}_tokens"]


def entropy_change(finals: list[dict], base: list[dict], relative: bool = False) -> Interval:
    """A model's token entropy at its end minus the base model's (relative: over it, minus 1), seed
    for seed, with its interval over problems and seeds."""
    problems = len(base[0]["correct"])
    data = (entropy_data("a", entropy_arrays(finals, problems))
            | entropy_data("b", entropy_arrays(base, problems)))
    if relative:
        return interval(lambda m: token_entropy(m, "a") / token_entropy(m, "b") - 1, data)
    return interval(lambda m: token_entropy(m, "a") - token_entropy(m, "b"), data)


# Student's t quantiles, two-sided 95% (0.975) and 80% power (0.80), by degrees of freedom; larger
# df: normal.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
         2.048, 2.045, 2.042)
T_80 = (1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870,
        0.868,
        0.866, 0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855,
        0.855, 0.854, 0.854)


def t_quantile(table: tuple, df: int, normal: float) -> float:
    return table[df - 1] if 1 <= df <= len(table) else normal


class Interval(tuple):
    """(estimate, low, high), a 95% interval, and what it rests on: `se`, `df` (Welch-Satterthwaite;
    0: the normal quantile), `dropped` (the share of problem draws where the statistic was
    undefined), `seeds` (the training seeds it spans: 1 is an interval over problems only),
    `drawn` (what `seeds` counts: ("seed",); ("population",) for ES members drawn once; both where
    a combination rests on as few of each), `mc_error` (the Monte Carlo error of its bounds from the
    bootstrap's finite draws: 0 where the variance is exact) and `detectable` (the smallest effect a
    two-sided 5% test of this se finds with 80% power: (t_0.975 + t_0.80) x se)."""

    def __new__(cls, estimate: float, se: float, df: int, dropped: float, seeds: int = 0,
                mc_error: float = 0.0, drawn: tuple[str, ...] = ("seed",)):
        half = t_quantile(T_975, df, 1.960) * se
        self = super().__new__(cls, (estimate, estimate - half, estimate + half))
        self.se, self.df, self.dropped, self.seeds, self.mc_error = se, df, dropped, seeds, mc_error
        self.drawn = drawn
        self.detectable = (t_quantile(T_975, df, 1.960) + t_quantile(T_80, df, 0.842)) * se
        return self

    def negated(self) -> Interval:
        return Interval(-self[0], self.se, self.df, self.dropped, self.seeds, self.mc_error,
                        self.drawn)


def informative(ci) -> bool:
    """Whether an interval measured any spread. One that did not (se 0, or rounding's: one seed of a
    number a model, or two models whose samples did not differ on any problem) has seen no variation
    to measure uncertainty by: its width of 0 is not precision, so no condition is decided on it,
    and shown() says so. A bare (estimate, low, high) is taken as given (the rules' tests)."""
    return not getattr(ci, "se", 1.0) <= NO_SPREAD  # an se of NaN: the rules' non-finite case


def problem_values(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each array's mean over seeds, problems first: {name: (P, ...)}, as a statistic takes its
    draws."""
    return {key: np.moveaxis(value.mean(-2), -1, 0) for key, value in data.items()}


def affine_values(statistic, data: dict[str, np.ndarray]) -> np.ndarray | None:
    """The statistic on each problem alone, (P,), where it is affine in the means (then a bootstrap
    of the problems has an exact variance: theirs over P); None where it is not, or undefined on
    some problem. Affine is checked where it matters: at every problem and at random mixtures of
    them."""
    each = problem_values(data)
    values = np.asarray(statistic(each), dtype=float)
    if values.shape != (len(next(iter(each.values()))),) or not np.all(np.isfinite(values)):
        return None
    for weights in np.random.default_rng(1).dirichlet(np.ones(len(values)), size=3):
        mixed = {key: np.tensordot(weights, value, axes=(0, 0))[None]
                 for key, value in each.items()}
        if not np.isclose(float(statistic(mixed)[0]), weights @ values, rtol=1e-9, atol=1e-12):
            return None
    return values


def resample_weights(pick: np.ndarray, size: int) -> np.ndarray:
    """(draws, size) each draw's share of every item, from its picks (draws, n) of range(size)."""
    offsets = pick + size * np.arange(len(pick))[:, None]
    return np.bincount(offsets.ravel(),
                       minlength=size * len(pick)).reshape(len(pick), size) / pick.shape[1]


@functools.lru_cache(maxsize=8)
def bootstrap_draws(problems: int, draws: int,
                    seed: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The bootstrap's draws of `problems` problems from `seed`, CHUNK at a time: (picks, weights)
    each, the same for every interval of that seed and size (made once, read by all)."""
    rng, chunks = np.random.default_rng(seed), []
    for start in range(0, draws, CHUNK):
        pick = rng.integers(problems, size=(min(CHUNK, draws - start), problems))
        chunks.append((pick, resample_weights(pick, problems)))  # (chunk, P) each
    for array in (array for chunk in chunks for array in chunk):
        array.flags.writeable = False
    return tuple(chunks)


def bootstrap_values(statistic, data: dict[str, np.ndarray], draws: int, seed: int) -> np.ndarray:
    """(draws,) the statistic on bootstrap draws of the problems (every seed kept, the same draw for
    every array). A draw's mean is its problems' counts (over P) times the seeds' means."""
    each = problem_values(data)  # {name: (P, ...)}
    values = []
    for pick, weights in bootstrap_draws(len(next(iter(each.values()))), draws, seed):
        means = {key: np.tensordot(weights, value, axes=(1, 0)) if np.isfinite(value).all()
                 else value[pick].mean(1)  # an undefined value counts only where drawn
                 for key, value in each.items()}
        values.append(np.asarray(statistic(means), dtype=float))
    return np.concatenate(values)


def interval(statistic, data: dict[str, np.ndarray], draws: int = DRAWS,
             seed: int | None = None) -> Interval:
    """statistic(means) with a 95% interval for a crossed design (the same problems for every seed
    and model): se^2 = the variance over a bootstrap of the problems (every seed kept, the same draw
    for every array) plus the leave-one-seed-out jackknife variance, and a t quantile with
    Welch-Satterthwaite degrees of freedom (right for few seeds, where a percentile bootstrap over 3
    seeds covers about 73%: tests simulate both). The problems' part is exact for a statistic affine
    in the means (differences of means: affine_values), else drawn (`draws`, from `seed` or
    bootstrap_seed()'s), its Monte Carlo error kept as the bounds' `mc_error`. One seed: the
    problems' part only, normal quantile. data: arrays (..., seeds, problems) over one problem set;
    statistic maps {name: means (draws, ...)} to (draws,)."""
    seeds, problems = next(iter(data.values())).shape[-2:]
    # (S, P, ...)
    whole = {key: np.moveaxis(value, (-2, -1), (0, 1)) for key, value in data.items()}
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = float(statistic({key: value.mean((0, 1))[None]
                                    for key, value in whole.items()})[0])
        exact, mc_variance = affine_values(statistic, data), 0.0
        if exact is not None:
            over_problems, dropped = float(np.var(exact)) / problems, 0.0
        else:
            values = bootstrap_values(statistic, data, draws,
                                      BOOTSTRAP_SEED.get() if seed is None else seed)
            finite = values[np.isfinite(values)]
            over_problems = float(np.var(finite, ddof=1)) if len(finite) > 1 else float("nan")
            dropped = 1 - len(finite) / draws
            if len(finite) > 1:  # the variance estimate's own variance: (m4 - v^2) / draws
                mc_variance = float(np.mean((finite - finite.mean()) ** 4)
                                    - over_problems ** 2) / len(finite)
        left_out = np.array([float(statistic({key: value[np.arange(seeds) != s].mean((0, 1))[None]
                                              for key, value in whole.items()})[0])
                             for s in range(seeds if seeds > 1 else 0)])
    # a seed whose absence leaves the statistic undefined: left out
    left_out = left_out[np.isfinite(left_out)]
    over_seeds = ((seeds - 1) / seeds * float(np.sum((left_out - left_out.mean()) ** 2))
                  if len(left_out) > 1 else 0.0)
    variance = over_problems + over_seeds
    # Welch-Satterthwaite: the seeds' part has seeds - 1 degrees of freedom, the problems' part
    # problems - 1
    df = variance ** 2 / (over_seeds ** 2 / max(seeds - 1,
                                                1) + over_problems ** 2 / max(problems - 1, 1)) \
        if variance > 0 else 0
    df = int(df) if np.isfinite(df) else 0
    # a bound moves by t x d(se), d(se) = d(variance) / (2 se)
    mc_error = t_quantile(T_975, df, 1.960) * max(mc_variance, 0.0) ** 0.5 / (2 * variance ** 0.5) \
        if variance > 0 else 0.0
    return Interval(estimate, variance ** 0.5, df, dropped, seeds, mc_error)


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple:
    return interval(lambda m: m["a"] - m["b"], {"a": a, "b": b})


def saved_interval(row: dict, key: str) -> Interval:
    """The Interval diversity_row saved as KEY, KEY_error: over the problems of one population drawn
    (seeds 1, counted as a population: how much another draw of the members would move it is not in
    it)."""
    return Interval(row[key], *row[key + "_error"][:3], seeds=1, drawn=("population",))


def combined(a: Interval, b: Interval, weight: float) -> Interval:
    """a - weight x b for two intervals from separate measurements, their errors taken as
    independent: variances added, Welch-Satterthwaite degrees of freedom (a df of 0, the normal
    quantile, counts as many). Measurements on overlapping problems covary a little; a positive
    covariance makes this se conservative."""
    parts = [a.se ** 2, (weight * b.se) ** 2]
    many = 10 ** 6
    dofs = [ci.df if ci.df > 0 else many for ci in (a, b)]
    variance = sum(parts)
    df = variance ** 2 / sum(p ** 2 / d for p, d in zip(parts, dofs)) if variance > 0 else 0
    df = 0 if df >= many / 2 else int(df)
    seeds = min((ci.seeds for ci in (a, b) if ci.seeds), default=0)  # 0: not known
    # what limits it: what the interval (or both) with the fewest draws counts
    drawn = tuple(dict.fromkeys(unit for ci in (a, b) if ci.seeds == seeds for unit in ci.drawn))
    return Interval(a[0] - weight * b[0], variance ** 0.5, df, max(a.dropped, b.dropped), seeds,
                    a.mc_error + weight * b.mc_error, drawn)


def seeds_share(ci, seeds: int) -> float:
    """The seeds' share of an interval's variance, read back from its Welch-Satterthwaite degrees of
    freedom: with many problems, df = V^2 / (V_seeds^2 / (seeds - 1)), so V_seeds / V = sqrt((seeds
    - 1) / df) (0 for one seed, where df is 0: problems only)."""
    df = getattr(ci, "df", 0)
    return min(1.0, ((seeds - 1) / df) ** 0.5) if df > 0 and seeds > 1 else 0.0


def seeds_for(ci, target: float, seeds: int, most: int = 200) -> int | None:
    """The fewest seeds, problems and samples as now, at which the interval's test detects `target`
    with 80% power (the seeds' part of the variance shrinks as 1 / seeds, the problems' part stays);
    None if more seeds cannot (the problems' part alone is too large, or more than `most` would be
    needed) or the interval measured no spread."""
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
    """How many times the problems (or independent samples of them) as now, seeds as now, the
    interval's test needs to detect `target` with 80% power: the problems' part of the variance
    shrinks as 1 / problems; None if the seeds' part alone is too large, or the interval measured no
    spread."""
    variance = getattr(ci, "se", float("nan")) ** 2
    if not (np.isfinite(variance) and informative(ci) and np.isfinite(target)):
        return None
    over_seeds = variance * seeds_share(ci, seeds)
    room = (target * ci.se / ci.detectable) ** 2 - over_seeds  # the problems' part allowed (its t)
    return max(1.0, (variance - over_seeds) / room) if room > 0 else None


def detectable(ci) -> str:
    """The smallest effect the interval's test detects with 80% power ("-" where unknown: no spread
    measured)."""
    value = getattr(ci, "detectable", float("nan"))
    return f"{value:.3f}" if np.isfinite(value) and informative(ci) else "-"


def shown(ci, digits: int = 3) -> str:
    """The estimate and its interval; "-" where there is no estimate (a level a path never reaches),
    and the share of problem draws where the statistic was undefined, if any (they are left out of
    its se); an interval that measured no spread, the estimate alone, said so."""
    if not np.isfinite(ci[0]):
        return "-"
    if not informative(ci):
        return f"{ci[0]:+.{digits}f} (no spread measured)"
    dropped = getattr(ci, "dropped", 0.0)
    return f"{ci[0]:+.{digits}f} [{ci[1]:+.{digits}f}, {ci[2]:+.{digits}f}]" + (
        f" ({dropped:.0%} of draws undefined)" if dropped > 0 else "")


def mean_std(values: list[float]) -> str:
    return (f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}" if len(values) > 1
            else f"{values[0]:.3f}")
