"""The recipe for adding a part to a claim (analyses/__init__.py), followed in a copy of the
repository: its worked example's two parts of claim 1, written into the four files the recipe names
and no other, pass tests/test_verdicts.py's cases and come out of the trajectories report as parts,
each with its margin."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what the example reads nothing of: the committed reports' data, the git folder, the model links
LEFT_OUT = {ROOT: {".git", "models"},
            ROOT / "report": {"runs", "analyses", "archive", "readme-runs", "smollm2-add-cpu",
                              "smollm2-add-gpu"}}
TOKENS_PART = "GRPO raises Pass@1 more than ES (at GRPO's tokens)"
ENTROPY_PART = "ES keeps its token entropy (at its end, no fall of a fifth of the base's)"
# the worked example, file by file: (text there, text that replaces it)
EXAMPLE = {
    # 1. the measurement: a matched comparison at the tokens spent, both reports' (comparisons)
    "analyses/paths.py": [(
        '**dict([at_the_shorter("grpo", "es", "sequences")])}',
        '**dict([at_the_shorter("grpo", "es", "sequences"),\n'
        '                     at_the_shorter("grpo", "es", "tokens")])}')],
    # 2. the claim's definition: the two values, then the two parts
    "analyses/reproduction/claims.py": [(
        "    return (values | (claim1_matched_values(",
        '    values["grpo_minus_es_pass1_at_tokens"] = versus(rows, "GRPO", "ES",\n'
        '                                                     "tokens")["pass@1"]\n'
        '    values["es_entropy_relative_change"] = entropy_change(\n'
        '        runs["es"]["finals"], runs["es"]["base"], relative=True)\n'
        "    return (values | (claim1_matched_values("), (
        "    conditions += [Condition(\"GRPO's token entropy collapses",
        f'    conditions += [Condition("{TOKENS_PART}", rises,\n'
        '                             e["grpo_minus_es_pass1_at_tokens"], TOLERANCE),\n'
        f'                   Condition("{ENTROPY_PART}", keeps,\n'
        '                             e["es_entropy_relative_change"], MARGINS["es_entropy"],\n'
        '                             reads="es_entropy")]\n'
        "    conditions += [Condition(\"GRPO's token entropy collapses"), (
        "from analyses.verdicts import (CLAIMS,",
        "from analyses.verdicts import (MARGINS, CLAIMS,")],
    # 3. the margin of its own, fixed and dated before data (the tokens part reads TOLERANCE's)
    "report/PREREGISTRATION.json": [(
        '"margins": {', '"margins": {"es_entropy": {"value": 0.2, "unit": "share of the base '
        'model\'s token entropy", "tests": "keeps on ES\'s relative entropy change", '
        '"reason": "the recipe\'s example", "fixed": "2026-12-08", "commit": "-", '
        '"data_seen": {}}, ')],
    # 4. the test: the hand-made numbers hold the values, and each part alone turns the verdict
    "tests/test_verdicts.py": [(
        '"grpo_minus_es_pass1_at_sequences": UP,',
        '"grpo_minus_es_pass1_at_sequences": UP, "grpo_minus_es_pass1_at_tokens": UP,\n'
        '            "es_entropy_relative_change": KEPT,'), (
        '    (1, {}, "reproduced"),',
        '    (1, {}, "reproduced"),\n'
        '    (1, {"grpo_minus_es_pass1_at_tokens": DOWN}, "not reproduced"),\n'
        '    (1, {"es_entropy_relative_change": (-0.5, -0.6, -0.4)}, "not reproduced"),')],
}
REPORT = """
import json, sys, types
from pathlib import Path
sys.path.insert(0, "tests")
import test_trajectories as t
from analyses.reproduction import trajectories
tmp = Path(sys.argv[1])
folders, base = t.planted(tmp, 1.4, 0.05), t.write_base(tmp)
flags = types.SimpleNamespace(runs=[str(f) for f in folders], base=str(base), out=str(tmp / "real"))
trajectories.write_trajectories(flags, "python eval.py trajectories ...")
"""


def left_out(folder: str, names: list[str]) -> set[str]:
    return LEFT_OUT.get(Path(folder), set()) | {"__pycache__", ".pytest_cache"}


def test_the_recipes_worked_example_adds_claim_parts_in_four_files(tmp_path):
    copy = tmp_path / "repository"
    shutil.copytree(ROOT, copy, ignore=left_out, symlinks=True)
    for name, edits in EXAMPLE.items():
        text = (copy / name).read_text()
        for old, new in edits:
            assert text.count(old) == 1, f"the recipe's example no longer fits {name}: {old}"
            text = text.replace(old, new)
        (copy / name).write_text(text)
    changed = [str(path.relative_to(copy)) for path in copy.rglob("*") if path.is_file()
               and "__pycache__" not in path.parts
               and (ROOT / path.relative_to(copy)).read_bytes() != path.read_bytes()]
    assert sorted(changed) == sorted(EXAMPLE)
    verdicts = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/test_verdicts.py", "-k", "hand_made or not_reproduced"],
                              cwd=copy, capture_output=True, text=True)
    assert verdicts.returncode == 0, verdicts.stdout[-3000:]
    made = subprocess.run([sys.executable, "-c", REPORT, str(tmp_path)], cwd=copy,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    parts = {part["part"]: part for part
             in json.loads((tmp_path / "real" / "report.json").read_text())["claim1"]["parts"]}
    assert parts[TOKENS_PART]["margin"] == 0.0035 and parts[ENTROPY_PART]["margin"] == 0.2
    text = (tmp_path / "real" / "REPORT.md").read_text()
    assert f"| 1 | {TOKENS_PART} |" in text and f"| 1 | {ENTROPY_PART} |" in text
    assert "a fall of 0.2 |" in text  # the margin as the table says it
