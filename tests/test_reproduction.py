"""eval.py reproduce: its plans and refusals, the quick reproduction end to end, and what its
report reads (paths at a level, a larger model's section, each part's minutes)."""
import dataclasses
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import eval as cli
from analyses import paths, verdicts
from analyses.reproduction import claims as claim_rules
from analyses.reproduction import evidence as gathered
from conftest import command, in_process, later


def run_eval(*argv):
    return in_process(cli.main, *argv)


def test_the_gpu_runs_script_refuses_a_deadline_that_is_not_a_number(tmp_path):
    """report/smollm2-add-gpu/h200.sh MODEL OUT SECONDS: a SECONDS that is not a whole number (bash
    would read the word SECONDS as its own clock, a deadline seconds away) is one line naming it,
    exit 2, before any run."""
    for seconds in ("SECONDS", "9000s", "-5"):
        done = subprocess.run(["bash", "report/smollm2-add-gpu/h200.sh", "m", str(tmp_path / "out"),
                               seconds], cwd=Path(cli.__file__).parent, capture_output=True,
                              text=True, timeout=60)
        assert (done.returncode == 2 and done.stderr.count("\n") == 1
                and f"'{seconds}'" in done.stderr)
    assert not (tmp_path / "out").exists()


def test_reproduce_plans_another_models_frontier_and_the_null_runs_from_its_flags(tmp_path):
    """--plan lists every claims run, the null ES run with ES's path points; --frontier-lrs and
    --frontier-alphas replace the tiny preset's frontier (report/smollm2-add-gpu/h200.sh launches
    these lines); a bad list is one line, exit 2."""
    design = ["reproduce", "--plan", "--out", str(tmp_path), "--preset", "paper", "--model", "m",
              "--task", "add",
              "--seeds", "0", "--steps", "18", "--es-population", "16", "--es-prompts", "32",
              "--grpo-prompts", "16", "--grpo-group", "8"]
    result = run_eval(*design, "--frontier-lrs", "3e-6,3e-5:50", "--frontier-alphas", "")
    assert result.returncode == 0, result.stderr[-2000:]
    runs = {line.split("--out ")[1].rsplit("/",
                                           1)[1]: line.split() for line
                                           in result.stdout.splitlines()}
    assert sorted(runs) == ["es-null-s0", "es-s0", "grpo-es-s0", "grpo-lr3e-05-s0",
                            "grpo-lr3e-06-s0", "grpo-s0"]

    def value(name, flag):  # the last value a run's line gives the flag, as argparse reads it
        return runs[name][max(i for i, word in enumerate(runs[name]) if word == flag) + 1]

    assert [value(name, "--steps") for name in ("grpo-s0", "es-s0",
                                                "grpo-es-s0")] == ["36", "12", "18"]
    assert value("grpo-lr3e-06-s0",
                 "--steps") == "36" and value("grpo-lr3e-05-s0", "--steps") == "50"
    assert value("grpo-lr3e-05-s0",
                 "--grpo-lr") == "3e-05" and value("grpo-lr3e-05-s0", "--model") == "m"
    assert "--es-null" in runs["es-null-s0"] and "--es-null" not in runs["es-s0"]
    assert value("es-null-s0", "--eval-every") == value("es-s0", "--eval-every") == "4"
    # the tiny preset's frontier, five seeds
    tiny = run_eval("reproduce", "--plan", "--out", str(tmp_path))
    assert (tiny.stdout.count("runs/grpo-lr1e-06-s") == 5
            and tiny.stdout.count("runs/es-alpha0.004-s") == 5)
    bad = run_eval(*design, "--frontier-lrs", "3e-6,-1e-5")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --frontier-lrs 3e-6,-1e-5: not a list of RATE[:UPDATES], rates above 0 ('-1e-5')"]


def test_reproduce_refuses_a_run_made_with_other_settings_before_training_any(tmp_path):
    """A run in OUT/runs made with other settings (a forgotten flag, say) is one line, exit 2,
    before any run is trained, and stays as it was: hours of training are not replaced by a
    mistake."""
    from scale.config import parse_args
    flags = ["reproduce", "--quick", "--parts", "claims", "--out", str(tmp_path)]
    last = run_eval(*flags, "--plan").stdout.splitlines()[-1].split()  # the null ES run's flags
    other = Path(last[last.index("--out") + 1])
    other.mkdir(parents=True)
    config = dataclasses.asdict(parse_args(last)) | {"rollout_dtype": "bfloat16"}
    (other / "config.json").write_text(json.dumps(config))
    result = run_eval(*flags)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {other}: a run made with --rollout-dtype 'bfloat16' (this one: 'model'); give its "
        f"settings, or remove it to train it again"]
    assert [path.name for path in (tmp_path / "runs").iterdir()] == [other.name]
    assert json.loads((other / "config.json").read_text()) == config


# the quick reproduction's first command, started as the session begins (conftest.py)
QUICK: dict = {}


def start_quick_reproduction(root: Path):
    """`eval.py reproduce --quick` with every part, on local JSONL files as a full-scale
    reproduction would run on GSM8K's, started in a process of its own while the other tests run: it
    takes a core the in-process tests leave idle. test_quick_reproduction_report_end_to_end reads
    what it made."""
    if QUICK:
        return
    from tiny_model.tasks import evaluation_pool, generate_problems, never_trained_on
    files = {"train": generate_problems("countdown", 200, seed=5, exclude=never_trained_on()),
             "test": evaluation_pool("countdown", "test")}
    for name, problems in files.items():
        (root / f"{name}.jsonl").write_text(
            "".join(json.dumps({"numbers": p["numbers"], "target": p["target"]}) + "\n"
                    for p in problems))
    data = ["--data", str(root / "train.jsonl"), "--eval-data", str(root / "test.jsonl")]
    argv = ["reproduce", "--quick", "--parts", "claims,claim6,paper-steps,sizes,untied", "--out",
            str(root / "report"), *data]
    QUICK.update(root=root, data=data,
                 done=later(lambda: command(["eval.py", *argv], Path(cli.__file__).parent, root)))


def test_quick_reproduction_report_end_to_end(tmp_path_factory):
    """On local JSONL files, as a full-scale reproduction would run on GSM8K's (the run flags pass
    through)."""
    start_quick_reproduction(tmp_path_factory.mktemp("quick"))  # if the session did not start it
    code = QUICK["done"].result().returncode
    root, data = QUICK["root"], QUICK["data"]
    report_dir = root / "report"
    result = SimpleNamespace(returncode=code, stdout=(root / "out.txt").read_text(),
                             stderr=(root / "err.txt").read_text())
    assert result.returncode == 0, result.stderr[-2000:]
    # lent by GRPO
    assert f"the base model's evaluation: {report_dir / 'runs' / 'grpo-s0'}'s" in result.stdout
    tmp_path = report_dir
    assert json.loads((tmp_path / "runs" / "es-s0"
                       / "config.json").read_text())["data"].endswith("train.jsonl")
    report = (tmp_path / "REPORT.md").read_text()
    written = json.loads((tmp_path / "report.json").read_text())
    claims = written["claims"]
    words = (*verdicts.VERDICTS, "not measured")
    assert len(claims) == 6 and all(claim["verdict"] in words for claim in claims)
    # intervals or counts
    assert all(len(part["value"]) in (2, 3) for claim in claims for part in claim["parts"])
    names = {part["part"] for claim in claims for part in claim["parts"]}
    assert "GRPO's Pass@32 falls below the base's (at its end)" in names.union(
        {name.replace("Pass@8", "Pass@32") for name in names})  # --quick's K is 8
    assert written["stability"]["seeds"] == 2 and "## Every part of every claim" in report
    for run in ("grpo-s0", "es-s0", "grpo-es-s0", "es-null-s0", "sweep-N2"):
        assert (tmp_path / "runs" / run / "summary.json").exists()
    # in no verdict: only with --parts es-grpo
    assert not (tmp_path / "runs" / "es-grpo-s0").exists()
    # claim 1's frontier
    for run in ("grpo-lr1e-06-s0", "grpo-lr1e-05-s0", "grpo-lr5e-05-s0", "es-alpha0.004-s0"):
        assert (tmp_path / "runs" / run / "summary.json").exists()
    # one a frontier ES rate
    assert sum("GRPO's frontier" in part["part"] for part in claims[0]["parts"]) == 2
    assert "| GRPO->ES |" in report and "## Budgets" in report and "## Fixed in advance" in report
    # claim 6
    assert "| raw |" in report and "| antithetic |" in report and "raw rewards' candidate" in report
    shown = {claim["claim"]: " ".join(item["name"] for item in claim["shown"]) for claim in claims}
    # claim 4's control
    assert "chosen on dev" in shown[6] and "GRPO at the paper's per-step ratio" in shown[4]
    assert "| module kinds by drift | here, largest first | the paper's largest |" in report
    assert ("on the largest model minus on the smallest" in shown[6]
            and "population size against model size" in report)
    # claim 4's module kinds, the head apart
    untied = report[report.index("With an LM head of its own"):]
    assert ("| lm_head |" in untied.splitlines()[2]
            and "ties its LM head" not in untied.split("##")[0])
    assert all((tmp_path / "analyses" / name / f"{name}.png").exists()
               for name in ("drift", "sparsity", "diversity", "curves", "pass_at_k", "paths",
                            "sizes"))
    # ES's weights gone, its metrics and summary other than its training here gives (as if made
    # elsewhere): not
    # replayed (update 1's reward is not its members'), trained again in full for the weight
    # analyses, then read
    # as it is now, not as it was when the gathering began
    es = tmp_path / "runs" / "es-s0"
    for file in (es / "stage1-es").glob("*.safetensors"):
        file.unlink()
    lines = (es / "metrics.jsonl").read_text().splitlines()
    lines[0] = json.dumps(json.loads(lines[0]) | {"reward": json.loads(lines[0])["reward"] + 0.01})
    (es / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    summary = json.loads((es / "summary.json").read_text())
    summary["stages"][-1] |= {"correct": [0] * len(summary["stages"][-1]["correct"]), "pass@1": 0.0}
    (es / "summary.json").write_text(json.dumps(summary))
    again = run_eval("reproduce", "--quick", "--parts", "claims", "--out", str(report_dir), *data)
    assert (again.returncode == 0
            and "evaluate otherwise: gathered again" in again.stdout), again.stderr[-2000:]
    assert "update 1's reward is" in again.stdout  # the replay stopped at the first update
    retrained = json.loads((es / "summary.json").read_text())["stages"][-1]
    curve = json.loads((tmp_path / "report.json").read_text())["curves"]["es"]
    assert curve["pass@1"] == pytest.approx(retrained["pass@1"]) and retrained["pass@1"] > 0


def test_paths_are_read_at_a_level_and_at_a_compute_value():
    x, y = np.array([[0.1, 0.2, 0.4]]), np.array([[0.9, 0.8, 0.6]])
    assert paths.at_level(x, y, np.array([0.3]))[0] == pytest.approx(0.7)
    assert paths.at_level(x, y, np.array([0.05]))[0] == pytest.approx(0.9)
    assert np.isnan(paths.at_level(x, y, np.array([0.5]))[0])
    axis = np.array([0.0, 10.0, 20.0])
    assert paths.at_compute(axis, np.array([[1.0, 2.0, 3.0]]), 15.0)[0] == pytest.approx(2.5)
    assert np.isnan(paths.at_compute(axis, np.array([[1.0, 2.0, 3.0]]), 25.0)[0])


def test_a_larger_models_report_says_what_changed_from_the_tiny_models(tmp_path):
    """scale_section: beside the tiny report (OUT/../report.json), a larger model's report gives
    GRPO's entropy fall at each rate's end, ES's Pass@1 gain and every claim's verdict, here and
    there; nothing for the tiny model itself or without the tiny report."""
    from types import SimpleNamespace

    from analyses.reproduction.scaling import scale_section
    (tmp_path / "report.json").write_text(json.dumps({
        "seeds": [0, 1, 2, 3, 4], "claims": [{"claim": 1, "verdict": "inconclusive", "parts": []}],
        "evidence": {"entropy_fall_grpo-lr1e-05": [-0.14, -0.2, -0.08],
                     "es_pass1_gain": [0.017, 0.012, 0.023]}}))
    values = {"entropy_fall_grpo": (-0.97, -0.98, -0.96),
              "entropy_fall_grpo-lr3e-06": (-0.25, -0.3, -0.2),
              "es_pass1_gain": (0.055, 0.041, 0.069)}
    claims = [claim_rules.Claim(1, claim_rules.CLAIMS[1], values, ()),
              claim_rules.Claim(5, claim_rules.CLAIMS[5], {}, ())]
    plan = SimpleNamespace(out=tmp_path / "real", args=SimpleNamespace(model="models/SmolLM2"),
                           seeds=[0])
    text = "\n".join(scale_section(SimpleNamespace(plan=plan), claims))
    assert "here grpo -97%, grpo-lr3e-06 -25% (1 of 2 learning rates halved or more)" in text
    assert "grpo-lr1e-05 -14% (0 of 1)" in text and "is seen here at grpo." in text
    assert ("here +0.055 [+0.041, +0.069]; on the tiny model +0.017 [+0.012, +0.023]. 1 seed here; "
            "5 seeds" in text)
    assert f"| 1. {claim_rules.CLAIMS[1]} | not measured | inconclusive |" in text
    assert f"| 5. {claim_rules.CLAIMS[5]} | not measured | - |" in text
    assert scale_section(SimpleNamespace(plan=SimpleNamespace(
        **{**vars(plan), "args": SimpleNamespace(model="")})), claims) == []
    assert scale_section(SimpleNamespace(plan=SimpleNamespace(
        **{**vars(plan), "out": tmp_path / "a" / "b"})), claims) == []


def test_each_parts_runs_are_timed_from_their_own_files(tmp_path):
    for name, minutes in (("grpo-s0", 3), ("es-s1", 4), ("es-null-s0", 2),
                          ("size-larger/sweep-N8", 1), ("x", 5)):
        folder = tmp_path / name
        folder.mkdir(parents=True)
        for stem, at in (("config", 1000), ("summary", 1000 + 60 * minutes)):
            (folder / f"{stem}.json").write_text("{}")
            os.utime(folder / f"{stem}.json", (at, at))
    (tmp_path / "grpo-es-s0").mkdir()  # unfinished: not counted
    (tmp_path / "grpo-es-s0" / "config.json").write_text("{}")
    measured = {"claims: the schedule runs": {"runs": 2, "minutes": "7.0"},
                "claims: the null and matched runs": {"runs": 1, "minutes": "2.0"},
                "sizes": {"runs": 1, "minutes": "1.0"}, "other": {"runs": 1, "minutes": "5.0"}}
    record = tmp_path / "run-minutes.json"
    assert gathered.runs_wall_minutes(tmp_path, record) == measured and record.exists()
    for summary in tmp_path.glob("**/summary.json"):  # a clone: every file written at once
        os.utime(summary, (summary.parent.joinpath("config.json").stat().st_mtime,) * 2)
    assert gathered.runs_wall_minutes(tmp_path, record) == measured  # each run's saved minutes
    assert gathered.runs_wall_minutes(tmp_path)["claims: the schedule runs"]["minutes"] == "0.0"
    # a run trained since, its file times there: its own minutes join the saved
    new = tmp_path / "es-null-s1"
    new.mkdir()
    for stem, at in (("config", 1000), ("summary", 1000 + 60 * 3)):
        (new / f"{stem}.json").write_text("{}")
        os.utime(new / f"{stem}.json", (at, at))
    assert gathered.runs_wall_minutes(tmp_path, record)["claims: the null and matched runs"] == {
        "runs": 2, "minutes": "5.0"}
    # the first record: part totals
    record.write_text(json.dumps({"runs": ["grpo-s0", "es-s1"], "table": {
        "claims: the schedule runs": {"runs": 2, "minutes": "7.0"}}}))
    assert gathered.runs_wall_minutes(tmp_path,
                                      record)["claims: the schedule runs"]["minutes"] == "7.0"
