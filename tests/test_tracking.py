"""--report-to: each line metrics.jsonl gets and each evaluation reach the tracker, read back from
the tracker's own files (tensorboard's reader, trackio's store) where its package is installed
(scale/requirements-trackers.txt; .ci/run's extras tier); the folder's logic with a recording
tracker everywhere; a missing package refused in one line."""
import importlib.util
import json
import sys

import pytest

import es_grpo
from conftest import TINY_RUN, run_scale
from scale import assembly, tracking

RUN = [*TINY_RUN, "--steps", "4", "--eval-every", "2", "--trajectory-samples", "4"]


def lines_of(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def logged_as_written(logged: dict[str, dict[int, float]], out):
    """The tracker's series (name -> step -> value) hold metrics.jsonl's rewards, KL, entropy and
    each evaluation's Pass@1 at the update it follows (the base's at 0)."""
    lines, stages = lines_of(out), json.loads((out / "summary.json").read_text())["stages"]
    assert logged["train/reward"] == pytest.approx({line["update"]: line["reward"]
                                                    for line in lines}, rel=1e-6)
    assert logged["train/kl"] == pytest.approx({line["update"]: line["kl"] for line in lines
                                                if line["stage"] == "grpo"}, rel=1e-6, abs=1e-9)
    assert logged["train/entropy"] == pytest.approx({line["update"]: line["entropy"]
                                                     for line in lines}, rel=1e-6)
    assert logged["eval/pass@1"] == pytest.approx({0: stages[0]["pass@1"], 2: stages[1]["pass@1"],
                                                   4: stages[2]["pass@1"]}, rel=1e-6)
    assert logged["eval/trajectory/pass@1"] == pytest.approx(
        {line["update"]: line["eval"]["pass@1"] for line in lines if "eval" in line}, rel=1e-6)
    assert set(logged["es/sigma"]) == {3, 4} and set(logged["train/learning_rate"]) == {1, 2}
    assert all(value > 0 for value in logged["es/update_norm"].values())


class Recording:
    """A tracker that keeps what it was given (the folder's logic, without a tracker's package):
    logged, name -> step -> value; sent, every (name, step) in the order logged."""
    logged: dict = {}

    def __init__(self, kind, out, config, resumed):
        assert config["report_to"] == kind and config["out"] == str(out)
        Recording.logged, Recording.sent, Recording.resumed = {}, [], resumed
        Recording.failed = None

    def log(self, values, step):
        for name, value in values.items():
            Recording.logged.setdefault(name, {})[step] = value
            Recording.sent.append((name, step))

    def close(self, failed):
        Recording.failed = failed


def test_each_metrics_line_and_evaluation_reaches_the_tracker_once(tmp_path, monkeypatch):
    """Every update once, at its number; the evaluations at the updates they follow; a run that
    raises closes its tracker as failed; a resumed run logs only the updates it takes."""
    monkeypatch.setattr(tracking, "Tracker", Recording)
    for module in (tracking, assembly):  # as if its package were installed
        monkeypatch.setattr(module, "missing", lambda tracker: None)
    out = tmp_path / "run"
    result = run_scale(*RUN, "--report-to", "tensorboard", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    logged_as_written(Recording.logged, out)
    assert len(Recording.sent) == len(set(Recording.sent)) and Recording.failed is False
    # the stages' totals, update by update: tokens per completion of each update alone
    lines = lines_of(out)
    assert Recording.logged["train/completions/mean_length"] == pytest.approx({
        line["update"]: (line["tokens"] - before["tokens"]) / (line["sequences"]
                                                                - before["sequences"])
        for before, line in zip([{"tokens": 0, "sequences": 0}, lines[0],
                                 {"tokens": 0, "sequences": 0}, lines[2]], lines)})
    # stopped in update 4, after update 3's checkpoint: the resumed run logs update 4 alone
    steps, stopped = [], tmp_path / "stopped"

    def es_step(*args):
        steps.append(1)
        if len(steps) == 2:
            raise RuntimeError("stopped")
        return real_step(*args)
    real_step = es_grpo.es_step
    monkeypatch.setattr(es_grpo, "es_step", es_step)
    with pytest.raises(RuntimeError, match="stopped"):
        run_scale(*RUN, "--save-every", "1", "--report-to", "tensorboard", "--out", str(stopped))
    assert sorted(Recording.logged["train/reward"]) == [1, 2, 3] and not Recording.resumed
    assert Recording.failed is True
    result = run_scale("--resume", str(stopped))
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(Recording.logged["train/reward"]) == [4] and Recording.resumed
    assert Recording.logged["eval/pass@1"].keys() == {4}  # the ES stage's; the base's not again
    assert len(Recording.sent) == len(set(Recording.sent)) and Recording.failed is False


def test_a_missing_trackers_package_is_one_line_and_exit_2(tmp_path, monkeypatch):
    for package in ("tensorboard", "trackio", "wandb"):
        monkeypatch.setitem(sys.modules, package, None)  # its import now fails
        result = run_scale(*TINY_RUN, "--report-to", package, "--out", str(tmp_path / "never"))
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert (f"--report-to {package}: the {package} package is not installed (pip install -r "
                "scale/requirements-trackers.txt)" in result.stderr)
        assert not (tmp_path / "never").exists()


def installed(package):
    return pytest.mark.skipif(importlib.util.find_spec(package) is None,
                              reason=f"{package} is not installed (scale/requirements-trackers.txt;"
                                     " .ci/run's extras tier installs it)")


@installed("tensorboard")
def test_tensorboard_event_files_hold_the_runs_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = tmp_path / "run"
    result = run_scale(*RUN, "--report-to", "tensorboard", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    logged_as_written({tag: {event.step: event.value for event in events.Scalars(tag)}
                       for tag in events.Tags()["scalars"]}, out)


@installed("trackio")
def test_trackios_local_store_holds_the_runs_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "store"))
    out = tmp_path / "run"
    result = run_scale(*RUN, "--report-to", "trackio", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    from trackio.sqlite_storage import SQLiteStorage
    logged: dict = {}
    name = json.loads((out / "tracker.json").read_text())["name"]  # the folder's and its start
    for entry in SQLiteStorage.get_logs(tracking.PROJECT, name):
        for name, value in entry.items():
            if name not in ("step", "timestamp") and value is not None:
                logged.setdefault(name, {})[entry["step"]] = value
    logged_as_written(logged, out)


@installed("wandb")
def test_wandb_logs_offline_into_the_run_folder(tmp_path, monkeypatch):
    """Offline by default, in RUN/wandb. Its records are read only by wandb's own (Go) core: the
    names are looked for in the run's file, the values are not read back."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    result = run_scale(*TINY_RUN, "--report-to", "wandb", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1
    written = runs[0].read_bytes()
    assert all(name in written for name in (b"train/reward", b"eval/pass@1", b"es/update_norm"))
