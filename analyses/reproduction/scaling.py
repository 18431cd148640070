"""What changed with scale: a larger model's report beside the tiny model's (report/report.json, the
report beside OUT), in each report's own numbers: GRPO's entropy at each learning rate's end, ES's
Pass@1 gain and, for a whole reproduction, each claim's verdict in both."""
from __future__ import annotations

import json
from pathlib import Path

from analyses.reproduction.evidence import Evidence
from analyses.statistics import shown
from analyses.verdicts import Claim


def scale_paragraph(values: dict, grpo_name: str, seeds: int, tiny_report: Path) -> list[str]:
    """GRPO's token entropy at each run's end relative to the base (claim 1's entropy_fall_* values;
    the calibrated rate's is named grpo_name) and ES's Pass@1 gain, here and in the tiny report (if
    it is a file)."""
    real = {grpo_name if key == "entropy_fall_grpo" else key[len("entropy_fall_"):]: value
            for key, value in values.items() if key.startswith("entropy_fall_")}
    tiny = json.loads(tiny_report.read_text()) if tiny_report.is_file() else {}
    evidence = tiny.get("evidence", {})
    tiny_falls = {key[len("entropy_fall_"):]: value for key, value in evidence.items()
                  if key.startswith("entropy_fall_")}
    said = lambda falls: ", ".join(f"{name} {value[0]:+.0%}"
                                   for name, value in falls.items())  # noqa: E731
    halved = lambda falls: sum(value[0] <= -0.5 for value in falls.values())  # noqa: E731
    near_zero = [name for name, value in real.items() if value[0] <= -0.9]
    seen = f"seen here at {', '.join(near_zero)}" if near_zero else "not seen here"
    tiny_gain = shown(evidence["es_pass1_gain"]) if "es_pass1_gain" in evidence else "-"
    counted = lambda n: f"{n} seed{'s' * (n != 1)}"  # noqa: E731
    return ["## What changed with scale", "",
            f"GRPO's token entropy at each run's end, relative to the base model's: here "
            f"{said(real)} "
            f"({halved(real)} of {len(real)} learning rates halved or more); on the tiny model "
            f"({tiny_report}) "
            f"{said(tiny_falls) or 'not found'} ({halved(tiny_falls)} of {len(tiny_falls)}). The "
            f"collapse the paper "
            f"reports (entropy near 0, after Cui et al.) is {seen}. ES's Pass@1 gain over the "
            f"base: here "
            f"{shown(values['es_pass1_gain'])}; on the tiny model {tiny_gain}. {counted(seeds)} "
            f"here; {counted(len(tiny.get('seeds', [])))} there."]


def scale_section(evidence: Evidence, claims: list[Claim]) -> list[str]:
    """For a model other than the shipped tiny one with the tiny report beside OUT
    (OUT/../report.json): scale_paragraph and each claim's verdict here and there; nothing
    otherwise."""
    plan = evidence.plan
    tiny_report = plan.out.parent / "report.json"
    if plan.args.model in ("", "tiny") or not tiny_report.is_file():
        return []
    tiny_verdicts = {row["claim"]: row["verdict"] for row
                     in json.loads(tiny_report.read_text()).get("claims", [])
                     if isinstance(row, dict)}  # a report made before its claims were records: "-"
    return [*scale_paragraph(claims[0].values, "grpo", len(plan.seeds), tiny_report), "",
            "| claim | verdict here | on the tiny model |", "|---|---|---|",
            *(f"| {claim.number}. {claim.statement} | {claim.verdict} | "
              f"{tiny_verdicts.get(claim.number, '-')} |" for claim in claims), ""]
