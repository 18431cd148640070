"""The parts' tests and the claims' verdict words. Each part of a claim is a Condition: a test
(rises, falls, keeps, no_gain, at_least, falls_by, every_seed) read off an interval
(statistics.interval) against a margin fixed in advance and dated in report/PREREGISTRATION.json; a
claim's verdict follows from its parts' outcomes. A Claim records one claim judged (its rule:
analyses/reproduction/claims.py)."""
from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from analyses.statistics import Interval, informative

# Every margin a rule reads, fixed in advance and dated, with its reason and what data were known
# when it was set: one committed file, which REPORT.md quotes (parts.preregistration_section).
PREREGISTRATION = Path(__file__).resolve().parent.parent / "report" / "PREREGISTRATION.json"
FIXED = json.loads(PREREGISTRATION.read_text())
MARGINS = {name: entry["value"] for name, entry in FIXED["margins"].items()}
# Pass@K and Pass@1: half the paper's smallest Pass@K effect (ES's Pass@32 gain), so that neither
# "keeps X" (the change in X above -TOLERANCE with 95% confidence) nor "absent" hides an effect of
# the paper's size.
TOLERANCE = MARGINS["pass"]
MIN_SEEDS = int(MARGINS["seeds"])  # fewer seeds decide no part that depends on training randomness
MAX_UNDEFINED = MARGINS["undefined"]  # a larger share of undefined bootstrap draws decides nothing

# A condition's outcome: True (it holds), False (it fails: the interval wholly on the wrong side),
# None (undecided), SMALL (real, on the claimed side, but the interval wholly inside the margin) or
# ABSENT (the claimed effect is shown absent: the interval inside (-margin, margin), across 0).
SMALL, ABSENT = "small", "absent"
# Margins besides TOLERANCE, each in its condition's own units, dated and explained in
# PREREGISTRATION.
ENTROPY_MARGIN_SHARE, CATASTROPHIC_SHARE = MARGINS["entropy"], MARGINS["catastrophic"]
COLLAPSE, EXPLAINED_SHARE, DRIFT_RATIO = MARGINS["collapse"], MARGINS["explained"], MARGINS["drift"]
OUTCOMES = {True: "holds", SMALL: "small", ABSENT: "absent", False: "fails", None: "undecided"}
# each verdict word, what it means: REPORT.md's header and its table of reachable outcomes
VERDICTS = {
    "reproduced": "every scored part holds",
    "small": "every scored part holds, and at least one is real but smaller than its margin",
    "not reproduced": "a part fails (its interval wholly on the wrong side of 0 or of its bound), "
                      "or the "
                      "effect it states is shown absent (its interval inside the margin, across 0)",
    "inconclusive": "no part fails or is absent, and at least one is undecided"}


def rises(ci, margin: float | None = None) -> bool | str | None:
    """X rises: True if the interval is above 0 (SMALL if, with a margin, it is also wholly below
    it); False if it is wholly at or below 0; ABSENT if it is inside (-margin, margin) across 0;
    None (undecided) otherwise, and for an interval that measured no spread."""
    low, high = ci[1], ci[2]
    if not (np.isfinite(low) and np.isfinite(high) and informative(ci)):
        return None
    if low > 0:
        return SMALL if margin is not None and high < margin else True
    if high <= 0:
        return False
    if margin is not None and -margin < low and high < margin:
        return ABSENT
    return None


def falls(ci, margin: float | None = None) -> bool | str | None:
    return rises((-ci[0], -ci[2], -ci[1]), margin) if informative(ci) else None


def keeps(ci, margin: float = TOLERANCE) -> bool | None:
    """No fall of the margin's size: True if the interval's lower end is above -margin, False if all
    of it is below (None: neither, or no spread measured)."""
    if not informative(ci):
        return None
    return True if ci[1] >= -margin else False if ci[2] < -margin else None


def no_gain(ci, margin: float = TOLERANCE) -> bool | None:
    """"X gives no benefit": True if the interval's upper end is below the margin, False if it is
    above 0."""
    if not informative(ci):
        return None
    return True if ci[2] < margin else False if ci[1] > 0 else None


def at_least(ci, bound: float) -> bool | None:
    """X is at least `bound`: True if the whole interval is, False if the whole of it is below."""
    if not (informative(ci) and np.isfinite(ci[1]) and np.isfinite(ci[2])):
        return None
    return True if ci[1] >= bound else False if ci[2] < bound else None


def falls_by(ci, share: float) -> bool | None:
    """A relative change (X after / X before - 1) is a fall of at least `share`: True if the whole
    interval is at or below -share, False if the whole of it is above."""
    return at_least((-ci[0], -ci[2], -ci[1]), share) if informative(ci) else None


class SeedCount(tuple):
    """(seeds that show something, seeds): every_seed's value."""

    @property
    def seeds(self) -> int:
        return self[1]


def every_seed(counted, margin=None) -> bool | None:
    """(seeds that show it, seeds): True if every seed does, False if none does, None otherwise."""
    shown_by, seeds = counted
    return True if shown_by == seeds > 0 else False if shown_by == 0 < seeds else None


def beyond_noise(counted, null: float) -> bool | None:
    """every_seed, where a run with no signal (the null ES run) could not produce it: undecided when
    the null run shows it too (`null`: the share of null runs that do)."""
    return None if null > 0 else every_seed(counted)


def verdict(*outcomes) -> str:
    """A claim's verdict from its scored parts' outcomes (VERDICTS says what each word means)."""
    if any(outcome is False or outcome == ABSENT for outcome in outcomes):
        return "not reproduced"
    if any(outcome is None for outcome in outcomes):
        return "inconclusive"
    return "reproduced" if all(outcome is True for outcome in outcomes) else "small"


@dataclasses.dataclass(frozen=True)
class Condition:
    """One scored part of a claim: `test` (rises, keeps, ...) read off the interval `value`, with a
    margin where one applies; `effect` is the paper's effect of its kind (the power plan's target;
    None: the margin). Every value rests on random draws the design makes once a seed (a training
    run, an ES population): over fewer than MIN_SEEDS of them (an interval over problems only) the
    part is not decided, and neither is it where the statistic was undefined in more than
    MAX_UNDEFINED of the bootstrap's draws; `measured` keeps what the interval alone says. `reads`:
    the PREREGISTRATION margin its margin is (or its value is built with) where that is not
    TOLERANCE's."""
    name: str
    test: Callable
    value: tuple
    margin: float | None = None
    effect: float | None = None
    reads: str | None = None

    @property
    def measured(self) -> bool | str | None:  # the test on the interval as it is
        return self.test(self.value) if self.margin is None else self.test(self.value, self.margin)

    @property
    def one_seed(self) -> bool:  # fewer seeds (or populations) than a part needs
        return 0 < getattr(self.value, "seeds", MIN_SEEDS) < MIN_SEEDS

    @property
    def preregistered(self) -> tuple[str, ...]:
        """The margins of PREREGISTRATION this part's outcome reads: the seeds and undefined rules
        (every part's), and its own margin's."""
        own = self.reads or ("pass" if self.margin == TOLERANCE else None)
        return ("seeds", "undefined", *([own] if own else []))

    @property
    def drawn(self) -> str:
        """What its value rests on, in words: "1 population", "5 seeds", "1 seed and 1 population"
        (a combination as short of each)."""
        count = getattr(self.value, "seeds", 0)
        return " and ".join(f"{count} {unit}{'s' * (count != 1)}"
                            for unit in getattr(self.value, "drawn", ("seed",)))

    @property
    # the statistic undefined in too many bootstrap draws to read its interval
    def undefined(self) -> bool:
        return getattr(self.value, "dropped", 0.0) > MAX_UNDEFINED

    @property
    def outcome(self) -> bool | str | None:
        return None if self.one_seed or self.undefined else self.measured

    def outcomes(self) -> set:
        """Every outcome this part can give on some data under its design: `outcome` on intervals
        over a grid around 0 and the margin (on counts of seeds for every_seed), each resting on as
        many seeds (or populations) as its value does, and on one whose statistic is undefined in
        too many draws. So a part over fewer than MIN_SEEDS can give only "undecided"."""
        seeds = getattr(self.value, "seeds", MIN_SEEDS)
        if self.test in (every_seed, beyond_noise):
            nulls = (0.0, 1.0) if self.test is beyond_noise else (self.margin,)
            return {dataclasses.replace(self, value=SeedCount((shown, seeds)), margin=null).outcome
                    for shown in range(seeds + 1) for null in nulls}
        scale = abs(self.margin) if self.margin else 1.0
        points = np.concatenate([-np.logspace(-3, 3, 61), [0.0], np.logspace(-3, 3, 61)]) * scale
        undefined = Interval(0.0, scale, 0, 1.0, seeds)
        found = {dataclasses.replace(self, value=undefined).outcome}
        for low in points:
            for high in points[points > low]:  # 1.960: the normal quantile an Interval of df 0 uses
                value = Interval((low + high) / 2, (high - low) / (2 * 1.960), 0, 0.0, seeds)
                found.add(dataclasses.replace(self, value=value).outcome)
        return found


def reachable(conditions: list[Condition]) -> list[str]:
    """The verdicts a rule of these conditions can reach, in VERDICTS' order: every combination of
    outcomes."""
    found = {verdict(*combination) for combination
             in itertools.product(*(c.outcomes() for c in conditions))}
    return [word for word in VERDICTS if word in found]


# the paper's six claims, as the report states them
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
