"""The committed reports are the code's reports (tests/conftest.py, report_copy): each is made again
from its committed runs and saved analyses with `eval.py reproduce --saved-only`, so an analysis
whose version changed since it was saved fails here, named, with the command that remakes it; every
part of every claim comes out as the committed report.json says, and no part's outcome moves across
20 bootstrap seeds. The real model's report is checked the same way in the real-model tier
(tests/test_real_model.py), where its model is."""
import json
import math
import re
from pathlib import Path

from conftest import ROOT, command, later, report_copy

TINY: dict = {}  # the tiny report's remake, started as the session begins (conftest.py)


def start_tiny_remake(root: Path):
    """The tiny report remade in a process of its own while the other tests run (conftest.later: a
    core they leave idle)."""
    if not TINY:
        argv = report_copy(root, "report")
        TINY.update(root=root,
                    done=later(lambda: command([str(ROOT / "eval.py"), *argv], root, root)))


def rounded(value):
    """A report.json record with every number to 9 significant digits (float rounding left out)."""
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return (None if math.isnan(value)
            else float(f"{value:.9g}")) if isinstance(value, float) else value


def same_parts(committed: dict, again: dict):
    """Every claim's verdict and every part's value and outcome, as committed (numbers to float
    rounding: the bootstrap's sums round otherwise on another thread count)."""
    remake = ("the committed report is not what the code makes of it: remake it with its "
              "REPORT.md's command")
    assert ([claim["verdict"] for claim in again["claims"]]
            == [claim["verdict"] for claim in committed["claims"]]), remake
    assert rounded(again["claims"]) == rounded(committed["claims"]), remake
    assert (again["stability"]["changed"] == committed["stability"]["changed"]
            and again["stability"]["seeds"] == 20)
    # no outcome moved with the seed
    assert not again["stability"]["changed"], again["stability"]["changed"]


def without_timings(report: str) -> str:
    """REPORT.md less what differs by invocation: its minutes, and the section of this invocation's
    wall time."""
    report = re.sub(r"`, \d+ min on this machine", "`, N min on this machine", report)
    return re.sub(r"## Wall time of each part.*?(?=\n## )", "", report, flags=re.S)


def same_report(committed: Path, again: Path):
    """The remade report says what the committed one says: every part (same_parts), and REPORT.md's
    text."""
    same_parts(json.loads((committed / "report.json").read_text()),
               json.loads((again / "report.json").read_text()))
    assert without_timings((again / "REPORT.md").read_text()) == without_timings(
        (committed
         / "REPORT.md").read_text()), f"{committed / 'REPORT.md'} is not what the code writes now"


def test_the_tiny_report_is_what_the_code_makes_of_its_runs(tmp_path_factory):
    start_tiny_remake(tmp_path_factory.mktemp("tiny"))  # if the session did not start it
    assert TINY["done"].result().returncode == 0, (TINY["root"] / "err.txt").read_text()[-3000:]
    same_report(ROOT / "report", TINY["root"] / "report")
