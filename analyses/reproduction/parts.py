"""The claims' records rendered: REPORT.md's opening table (claim, part, estimate and interval,
margin, outcome), each claim's verdict and what it shows beside its parts, the margins and design
fixed in advance (verdicts.FIXED) and the bootstrap's check (montecarlo.stability); report.json's
records of the same. It reads records; it measures nothing."""
from __future__ import annotations

import json

import numpy as np

from analyses.paths import LABELS
from analyses.reproduction.claims import SATURATION
from analyses.statistics import shown
from analyses.verdicts import (CATASTROPHIC_SHARE, ENTROPY_MARGIN_SHARE, FIXED, MIN_SEEDS, Claim,
                               OUTCOMES, PREREGISTRATION, TOLERANCE, VERDICTS, SeedCount,
                               at_least, beyond_noise, every_seed, falls, falls_by, keeps, no_gain,
                               reachable, rises)

MARGIN_WORDS = {rises: "above 0; ±{m}", falls: "below 0; ±{m}", keeps: "a fall of {m}",
                no_gain: "below {m}",
                at_least: "at least {m}", falls_by: "a fall of {m}", every_seed: "every seed",
                beyond_noise: "every seed; not the null run"}
DESIGN = ("seeds", "eval_problems", "samples", "diversity_problems", "forgetting_problems")


def estimate(value, digits: int | None = None) -> str:
    """A part's or a shown value's estimate with its 95% interval; a count of seeds; a number; a
    word."""
    if isinstance(value, SeedCount):
        return f"{value[0]} of {value[1]} seeds"
    if isinstance(value, tuple):
        size = abs(value[0]) if np.isfinite(value[0]) else 0.0
        return shown(value, digits or (1 if size >= 10 else 4 if size < 0.01 else 3))
    if isinstance(value, float):
        return f"{value:.{digits or 3}f}"
    return str(value)


def margin_word(condition) -> str:
    """The part's test and its margin, as the table says them."""
    word = MARGIN_WORDS.get(condition.test, condition.test.__name__)
    if condition.test is beyond_noise:
        return word
    return (word.format(m=f"{condition.margin:.4g}") if condition.margin is not None
            else word.split(";")[0])


def outcome_word(condition) -> str:
    """The part's outcome; one its interval cannot decide (too few seeds, too many undefined draws,
    a null run that shows it too) with what the interval alone says."""
    if condition.one_seed:
        return (f"undecided: {condition.drawn} (over problems only: "
                f"{OUTCOMES[condition.measured]})")
    if condition.undefined:
        return (f"undecided: undefined in {condition.value.dropped:.0%} of draws (the rest: "
                f"{OUTCOMES[condition.measured]})")
    if condition.test is beyond_noise and condition.margin:
        return f"undecided: the null run shows it too (ES: {OUTCOMES[every_seed(condition.value)]})"
    return OUTCOMES[condition.outcome]


def known_margins(claim: Claim, key: str) -> str:
    """The margins a claim's verdict reads (its parts' Condition.preregistered) that were set with
    the report `key`'s data known, as PREREGISTRATION's data_seen says."""
    names = sorted({name for c in claim.conditions for name in c.preregistered})
    seen = [FIXED["margins"][name]["data_seen"].get(key) for name in names]
    if None in seen:
        return "not recorded for this report"
    return ", ".join(name for name, said in zip(names, seen) if not said.startswith("none")) or "-"


def parts_section(claims: list[Claim], key: str | None = None) -> list[str]:
    """REPORT.md's opening table: every part of every claim, then each claim's verdict (with the
    margins it reads that were set with the report `key`'s data known) and what it shows."""
    rows = []
    for claim in claims:
        rows += [f"| {claim.number} | {c.name} | {estimate(c.value)} | {margin_word(c)} | "
                 f"{outcome_word(c)} |" for c in claim.conditions]
        rows += [f"| {claim.number} | {part} | - | - | not measured: {why} |"
                 for part, why in claim.unmeasured]
    header, rule = "| claim | verdict |", "|---|---|"
    verdicts = [f"| {claim.number}. {claim.statement} | **{claim.verdict}** |" for claim in claims]
    if key is not None:  # the margins table's flag, carried to each verdict that reads the margin
        header += " margins it reads set with this report's data known |"
        rule += "---|"
        verdicts = [f"{line} {known_margins(claim, key)} |"
                    for line, claim in zip(verdicts, claims)]
    context = []
    for claim in claims:
        if claim.shown:
            context += [f"**Claim {claim.number}**, shown beside its parts: "
                        + "; ".join(f"{item.name} {estimate(item.value, item.digits)}" for item
                                    in claim.shown)
                        + ".", ""]
    return ["## Every part of every claim", "",
            "Each part's outcome: *holds*, *small* (real, but inside its margin), *absent* (inside "
            "the margin, "
            "across 0), *fails* or *undecided*; how each test reads its interval and what each "
            "verdict means: "
            "\"How the table is read\" below. `es` and `es-alpha...` are ES at its alpha and a "
            "second one; "
            "GRPO's frontier is the best of its learning rates' paths where they reach that ES's "
            "Pass@1.", "",
            "| claim | part | estimate [95% interval] | margin | outcome |",
            "|---|---|---|---|---|", *rows, "",
            header, rule, *verdicts, "", *context]


def stability_lines(record: dict) -> list[str]:
    """The bootstrap's check: outcomes that moved with its seed (none, if all is well) and the
    largest Monte Carlo error of a bound."""
    part, error = record["largest_mc_error"]
    moved = "; ".join(f"{name}: {', '.join(sorted(set(found)))}"
                      for name, found in record["changed"].items())
    return [f"Every outcome above was found again under {record['seeds'] - 1} other bootstrap "
            f"seeds: " + (f"these moved: {moved}." if moved else "none moved.")
            + f" The largest Monte Carlo error of a bound is {error:.2g} ({part}); a difference of "
              f"means has an "
            "exact bootstrap variance and none.", ""]


def report_key(out) -> str:
    """The report folder's name in the preregistration file (its path under the repository, else as
    given)."""
    root = PREREGISTRATION.parent.parent
    try:
        return str(out.resolve().relative_to(root))
    except ValueError:
        return str(out)


def preregistration_section(plan) -> list[str]:
    """The margins and this report's design as fixed in advance (verdicts.FIXED), with when each was
    fixed and what data were known then; the rules changed after data (FIXED's `changed`); this
    invocation's design against the fixed one."""
    key = report_key(plan.out)
    design = FIXED["reports"].get(key)
    margins = {name: {"value": f"{entry['value']:g}", "unit": entry["unit"],
                      "fixed": entry["fixed"],
                      "known then": entry["data_seen"].get(key, "not recorded for this report"),
                      "why": entry["reason"]} for name, entry in FIXED["margins"].items()}
    rows = [f"| {name} | {m['value']} | {m['unit']} | {m['fixed']} | {m['known then']} | "
            f"{m['why']} |" for name, m in margins.items()]
    where = PREREGISTRATION.relative_to(PREREGISTRATION.parents[1])
    lines = ["## Fixed in advance", "",
             f"Each margin and this report's design are fixed in `{where}` (dated). Where a "
             "margin was set with this report's data known, the table says so, and so does each "
             "verdict that reads it (the verdicts' table above): its outcome is weaker evidence "
             "than one fixed before.", "",
             "| margin | value | unit | fixed | data known then | why |",
             "|---|---|---|---|---|---|", *rows, "", *changed_lines(key)]
    if design is None:
        return lines + [f"No design was fixed in advance for `{key}`.", ""]
    here = {"seeds": plan.seeds, "eval_problems": plan.args.eval_problems, "samples": plan.samples,
            "diversity_problems": plan.diversity_problems,
            "forgetting_problems": plan.forgetting_problems}
    differ = [f"{name} {here[name]} (fixed: {design[name]})" for name in DESIGN if here[name]
              != design[name]]
    return lines + [f"This report's design was fixed on {design['fixed']} ({design['commit']}): "
                    f"task "
                    f"{design['task']}, seeds {design['seeds']}, {design['eval_problems']} "
                    f"problems x "
                    f"{design['samples']} samples; {design['reason']}. "
                    + data_seen_words(design) + "This invocation "
                    + (f"differs: {'; '.join(differ)}." if differ else "keeps it."), ""]


def changed_lines(key: str) -> list[str]:
    """Every rule or margin changed after data were seen (FIXED's `changed`): its commit, what it
    changed, what of this report was known then and which of its verdicts it moved."""
    rows = [f"| {entry['commit']} | {entry['date']} | {entry['rules']} | {entry['what']} | "
            f"{entry['data_seen'].get(key, 'not recorded for this report')} | "
            f"{entry['verdicts'].get(key, 'not recorded for this report')} |"
            for entry in FIXED.get("changed", [])]
    return ["Rules and margins changed after data were seen, each listed in the same file; the "
            "rules above are as they stand after these changes:", "",
            "| commit | date | rules | what changed | this report's data known then | its "
            "verdicts moved |", "|---|---|---|---|---|---|", *rows, ""] if rows else []


def data_seen_words(design: dict) -> str:
    """When the design's data were first committed (its `data_seen`), and whether that came before
    the design was fixed."""
    seen = design.get("data_seen")
    if seen is None:
        return "When its data were first committed is not recorded. "
    before = (" (before its design was fixed: the design is not blind to them)"
              if seen["date"] < design["fixed"] else "")
    return (f"Its data were first committed on {seen['date']} ({seen['commit']}){before}: "
            f"{seen['what']}. ")


def replicate_section(evidence) -> list[str]:
    """The run-to-run spread this report's design names (`replicate` in PREREGISTRATION: the same
    settings trained on another machine): each run there at its last point beside this report's run
    of the same algorithm and rates, at its last point at or before that update. Shown, in no
    interval: one replicate on another machine is not a second seed, and it enters no part."""
    design = FIXED["reports"].get(report_key(evidence.plan.out), {})
    folder = PREREGISTRATION.parents[1] / design.get("replicate", "")
    if not design.get("replicate") or not (folder / "report.json").is_file():
        return []
    there = json.loads((folder / "report.json").read_text())["runs"]
    here = {**evidence.frontier, **evidence.runs}
    rows = []
    for name, row in there.items():
        config = json.loads((folder / "runs" / name / "config.json").read_text())
        twin = next((run for run in here.values() if same_rates(run["config"], config)), None)
        if twin is None:
            continue
        update = int(str(row["updates"]).split("/")[0])
        points = [point for point in twin["paths"][0] if point["update"] <= update]
        rows.append(f"| {name} | {update} | {row['pass@1']} | {points[-1]['update']} | "
                    f"{float(np.mean(points[-1]['pass@1'])):.3f} |")
    return ["## The same settings on another machine", "",
            f"`{design['replicate']}` trained these runs with this report's settings on "
            f"{design.get('replicate_machine', 'another machine')}; the spread between the two is "
            f"the only "
            "measure of run-to-run variation this design has. It enters no interval (one "
            "replicate, on other hardware, is not a seed): it shows why one seed decides no part "
            "that depends "
            "on training.", "",
            "| run there | its update | its Pass@1 | here, update | here, Pass@1 |",
            "|---|---|---|---|---|", *rows, ""]


def same_rates(mine: dict, theirs: dict) -> bool:
    """Two runs' settings name the same schedule at the same rates (the rates its algorithms
    use)."""
    used = [key for key in ("grpo_lr", "es_alpha") if key.split("_")[0] in mine["algo"].split("-")]
    return all(mine.get(key) == theirs.get(key) for key in ("algo", "es_null", *used))


def claim_records(claims: list[Claim]) -> list[dict]:
    """report.json's claims: each part with its estimate, interval, margin and outcome; what each
    shows."""
    def value(v):
        return list(v) if isinstance(v, tuple) else v
    return [{"claim": claim.number, "statement": claim.statement, "verdict": claim.verdict,
             "parts": [{"part": c.name, "value": value(c.value), "test": c.test.__name__,
                        "margin": c.margin,
                        "outcome": OUTCOMES[c.outcome], "over_problems": OUTCOMES[c.measured]}
                       for c in claim.conditions],
             "shown": [{"name": item.name, "value": value(item.value)} for item in claim.shown],
             "unmeasured": [list(part) for part in claim.unmeasured]} for claim in claims]


def rules_section() -> list[str]:
    """How the table is read: the intervals, each test, the margins and the verdict words."""
    return [
        "## How the table is read", "",
        "Every interval is 95%: the estimate plus or minus a t quantile (Welch-Satterthwaite "
        "degrees of freedom) "
        "times a standard error made of a paired bootstrap over the problems (the same draw for "
        "every model "
        "compared; exact for a difference of means) and a leave-one-seed-out jackknife over the "
        "seeds. Each part "
        "of a claim is a test of its interval against 0 and a margin fixed in advance (the next "
        "section): "
        "*rises* (or *falls*) holds when the interval is above (below) 0, is *small* when it is "
        "also wholly "
        "inside the margin, is *absent* when it lies inside (-margin, margin) across 0, and fails "
        "when it is "
        "wholly on the wrong side of 0; *keeps* holds when the interval's lower end is above "
        "-margin and fails "
        "when the whole of it is below; *at least* reads the interval against a bound; *every "
        "seed* holds when "
        "every seed shows it and fails when none does (for ES's module kinds, undecided where the "
        "null run shows "
        "it too). None is decided on an interval of no spread (se 0), on fewer seeds than the "
        "fixed minimum, or "
        "where the statistic was undefined in more of the bootstrap's draws than the fixed share. "
        f"Margins: Pass@K and Pass@1, {TOLERANCE:g}; token entropy, {ENTROPY_MARGIN_SHARE:g} of "
        f"the base model's, in "
        f"nats; catastrophic forgetting, a fall of {CATASTROPHIC_SHARE:g} of the base model's "
        f"held-out Pass@K; the others as the table gives them. A claim's verdict: "
        + "; ".join(f"*{word}*: {meaning}" for word, meaning in VERDICTS.items())
        + ". Values shown beside the parts are context: in no verdict.", ""]


def saturation_section(claims: list[Claim]) -> list[str]:
    """Where a GRPO-trained run leaves no room for a loss of coverage (claims.ceilings), and which
    parts that decides or leaves undecidable."""
    record = claims[0].values.get("ceilings")
    if not record:
        return []
    base, runs = record["base_passk"], record["runs"]
    k = claims[0].values["k"]
    lines = []
    for name, run in runs.items():
        if run["reaches_base_passk"] is None:
            continue
        saturates = (f"; Pass@1 {SATURATION:g} or more from update {run['saturates']}: the task "
                     f"saturates there" if run["saturates"] is not None else "")
        lines.append(f"- {LABELS.get(name, name)}: Pass@1 reaches the base's Pass@{k} ({base:.3f}) "
                     f"at update "
                     f"{run['reaches_base_passk']} (highest "
                     f"{run['highest_pass1']:.3f}){saturates}. From there its "
                     f"Pass@{k} cannot be below the base's: Pass@{k} >= Pass@1 on every problem.")
    grpo = runs.get("grpo")
    if grpo is not None:
        room = base - grpo["end_pass1"]
        lines.append(f"- Claim 1's part \"GRPO's Pass@{k} falls below the base's\" reads the "
                     f"calibrated GRPO run at its end (Pass@1 {grpo['end_pass1']:.3f}): "
                     + ("it cannot hold there (no room to fall), and so is decided against by the "
                        "ceiling, not by a loss of coverage." if room <= 0 else
                        f"its Pass@{k} can fall at most {room:.3f} below the base's."))
    if not lines:
        return []
    levels = record.get("matched_levels", {})
    if levels:
        below = all(level < base for level in levels.values())
        lines.append("- The parts at matched Pass@1 meet GRPO's paths at " + " and ".join(
            f"{LABELS.get(name, name)}'s Pass@1 ({level:.3f})" for name, level in levels.items())
            + (f": below the base's Pass@{k}, where no ceiling decides them." if below else
               f": at or above the base's Pass@{k}, where the ceiling may decide them."))
    return ["## Where the task leaves no room to fall", "",
            f"A run whose Pass@1 reaches the base model's Pass@{k} cannot have a lower Pass@{k} "
            f"than the base from "
            "there on; a run at Pass@1 near 1 has nothing left to lose. Such runs decide the parts "
            "that read them "
            "by the ceiling, not by the methods (choosing a task that does not saturate is the "
            "cure):", "", *lines, ""]


def reachable_section(claims: list[Claim]) -> list[str]:
    """Each claim's parts with their outcome now, and the verdicts its rule can reach under this
    design (verdicts.reachable: every outcome each part gives on a grid of intervals over its own
    count of seeds or populations, combined)."""
    rows = [f"| {claim.number} | "
            + "; ".join(f"{c.name}: {OUTCOMES[c.outcome]}" for c in claim.conditions)
            + f" | {', '.join(reachable(list(claim.conditions)))} |" for claim in claims
            if claim.conditions]
    return ["## What each rule can reach", "",
            "Each claim's parts with their outcome here, and every verdict its rule can reach on "
            "some data (found "
            "by trying each part's test on intervals over a grid around 0 and its margin). Each "
            "interval tried rests on as many seeds or populations as the part's own: a part over "
            f"fewer than {MIN_SEEDS} can come out only undecided, whatever the data, and the "
            "verdicts listed are those this design can reach.", "",
            "| claim | parts: outcome here | verdicts it can reach |", "|---|---|---|", *rows, ""]
