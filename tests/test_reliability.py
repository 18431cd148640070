"""Run folders: crash-safe checkpoints, exact resumption and locks (scale/runs.py, through python -m
scale.train); the reference's own folder (es_grpo.RunFolder) and --overwrite; determinism;
degenerate signals."""
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import es_grpo
from conftest import ROOT, SMALL_RUN, command, later, ran, run_es_grpo, run_scale, summary_of
from scale.runs import hold

RUN = ["--steps", "6", "--es-population", "4", "--es-prompts", "4", "--grpo-prompts", "2",
       "--grpo-group", "4",
       "--eval-problems", "2", "--heldout-problems", "2", "--eval-samples", "16", "--save-every",
       "1"]


def final_weights(out):
    return load_file(out / "stage2-es" / "model.safetensors")


def metrics_without_timing(out):
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in ("seconds", "seq_per_s")} for line in lines]


TRAJECTORY_RUN = [*RUN, "--eval-every", "2", "--trajectory-samples", "4"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run the kill points, the determinism check and the early resume compare
    against (run in this process: the killed runs are real processes, their resumptions need not
    be)."""
    out = tmp_path_factory.mktemp("reference") / "run"
    assert run_scale(*TRAJECTORY_RUN, "--out", str(out)).returncode == 0
    return out


# updates written before the kill; GRPO: 1-3, ES: 4-6
KILL_POINTS = {"in-grpo-stage": 1, "in-es-stage": 4}


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory):
    """`python -m scale.train` started for each kill point at once (real processes: SIGKILL leaves
    what a crash leaves), each killed once its metrics.jsonl holds that many updates. name -> run
    folder."""
    root, running = tmp_path_factory.mktemp("killed"), {}
    for name in KILL_POINTS:
        running[name] = subprocess.Popen([sys.executable, "-m", "scale.train", *TRAJECTORY_RUN,
                                          "--out",
                                          str(root / name)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while running and time.time() < deadline:
        for name, process in list(running.items()):
            metrics = root / name / "metrics.jsonl"
            if process.poll() is not None or (metrics.exists()
                                              and len(metrics.read_text().splitlines())
                                              >= KILL_POINTS[name]):
                process.send_signal(signal.SIGKILL)
                process.wait()
                del running[name]
        time.sleep(0.01)
    return {name: root / name for name in KILL_POINTS}


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_then_resume_is_bit_identical_to_an_uninterrupted_run(
        reference, killed_runs, point):
    """Killed in each stage, with trajectory points on the way (which must not move the random
    streams)."""
    killed = killed_runs[point]
    assert not (killed / "summary.json").exists(), "the run finished before it could be killed"
    resumed = run_scale("--resume", str(killed))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming" in resumed.stdout
    expected, got = final_weights(reference), final_weights(killed)
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)
    # each update exactly once
    assert metrics_without_timing(killed) == metrics_without_timing(reference)
    assert [m["update"] for m in metrics_without_timing(killed)] == [1, 2, 3, 4, 5, 6]
    assert [m["update"] for m in metrics_without_timing(killed) if "eval" in m] == [2, 4, 6]
    assert summary_of(killed) == summary_of(reference)


def test_non_finite_weights_stop_the_run_and_keep_the_last_good_checkpoint(tmp_path):
    out = tmp_path / "run"
    result = run_scale(*RUN, "--algo", "grpo", "--grpo-lr", "1e30", "--out", str(out))
    assert result.returncode != 0 and "non-finite" in result.stderr.splitlines()[-1]
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=False)
    assert all(torch.isfinite(t).all() for t in checkpoint["model"].values())
    assert not (out / "summary.json").exists()


def test_resume_of_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path):
    result = run_scale("--resume", str(tmp_path))
    assert result.returncode != 0 and "not a resumable run folder" in result.stderr.splitlines()[-1]


def test_same_command_and_seed_give_identical_metrics_and_weights(reference, tmp_path):
    assert run_scale(*TRAJECTORY_RUN, "--out", str(tmp_path / "again")).returncode == 0
    a, b = final_weights(reference), final_weights(tmp_path / "again")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert metrics_without_timing(reference) == metrics_without_timing(tmp_path / "again")


def test_resume_before_the_first_checkpoint_starts_over_cleanly(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    (out / "checkpoint.pt").unlink()  # as if killed before the first checkpoint was written
    (out / "summary.json").unlink()
    resumed = run_scale("--resume", str(out))
    assert resumed.returncode == 0 and "after update 0" in resumed.stdout
    # each update once, as uninterrupted
    assert metrics_without_timing(out) == metrics_without_timing(reference)
    assert all(torch.equal(a, b)
               for a, b in zip(final_weights(out).values(), final_weights(reference).values()))


RACE: dict = {}  # the two runs started at once, started as the session begins (conftest.py)


def start_race(root: Path):
    """Two `python -m scale.train` runs with one --out started together, in conftest.later's
    lane."""
    if RACE:
        return
    out, argv = root / "race" / "run", ["-m", "scale.train", *RUN, "--steps", "2"]
    out.parent.mkdir()

    def started():
        logs = [root / f"logs{number}" for number in range(2)]
        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(lambda log: (log.mkdir(), command([*argv, "--out", str(out)],
                                                                   ROOT, log))[1], logs))
        return [ran(run, log) for run, log in zip(runs, logs)]
    RACE.update(out=out, done=later(started))


def test_two_runs_started_at_once_on_one_folder_end_with_one_run_and_one_refusal(tmp_path):
    """The folder appears whole (made aside, then renamed into place) and its lock is held for the
    run's life: of two runs started together with the same --out, one finishes and the other is
    refused in one line with exit 2, whichever step of the race it reached; the finished run's files
    are its own."""
    start_race(tmp_path)  # if the session did not start it
    out = RACE["out"]
    results = sorted((run.returncode, run.stderr) for run in RACE["done"].result())
    assert [code for code, _ in results] == [0, 2], results[1][1][-2000:]
    refusal = results[1][1].strip().splitlines()
    assert len(refusal) == 1 and refusal[0].startswith("error: ") and str(out) in refusal[0]
    assert [json.loads(line)["update"] for line
            in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert json.loads((out / "summary.json").read_text())["stages"][-1]["name"] == "es"
    assert not [path for path in out.parent.iterdir() if path.name != "run"]  # no staging left


def test_a_run_folder_a_live_process_holds_is_refused_and_left_untouched(reference, tmp_path):
    """--resume or --overwrite of a folder whose lock a running process holds: one line, exit 2."""
    held = tmp_path / "held"
    shutil.copytree(reference, held)
    (held / "summary.json").unlink()  # a live run is unfinished (a finished one: refused as such)
    before = {path.name: path.stat().st_mtime_ns for path in held.iterdir()}
    lock = hold(held)
    try:
        for flags in (["--resume", str(held)], [*RUN, "--out", str(held), "--overwrite"]):
            result = run_scale(*flags)
            assert (result.returncode == 2 and "a running process holds this run folder"
                    in result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1
    finally:
        lock.close()
    assert {path.name: path.stat().st_mtime_ns for path in held.iterdir()} == before


def test_resume_refuses_the_flags_it_would_ignore(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    (out / "summary.json").unlink()  # not finished: resumable
    result = run_scale("--resume", str(out), "--steps", "10")
    assert result.returncode == 2 and "--steps would be ignored" in result.stderr


def files_of(folder: Path) -> dict:
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_resume_refuses_a_finished_run_and_an_es_grpo_folder_and_empties_nothing(
        reference, finished_run, tmp_path):
    """A finished scale.train run, and a folder es_grpo.py made (finished, then not: its
    config.json has no launcher settings): one line naming the folder and what it holds, exit 2,
    every file as it was."""
    unfinished = tmp_path / "es_grpo-run"
    shutil.copytree(finished_run[0], unfinished)
    (unfinished / "summary.json").unlink()
    for folder, holds in [(reference, "holds a finished run (summary.json)"),
                          (finished_run[0], "holds a finished run (summary.json)"),
                          (unfinished, "holds a run es_grpo.py made (its config.json has no "
                                       "scale.train settings)")]:
        before = files_of(folder)
        result = run_scale("--resume", str(folder))
        assert result.returncode == 2 and result.stdout == "", result.stderr[-2000:]
        said = result.stderr.splitlines()
        assert len(said) == 1 and said[0].startswith(f"error: --resume {folder}: {holds}"), said
        assert files_of(folder) == before


def test_base_from_takes_the_base_evaluation_a_fresh_measurement_equals(reference, tmp_path):
    """Another schedule, rate and trajectory points, the same evaluation settings: the base it
    measures is the reference's, which is why --base-from may take it. Taken, it is the source's own
    (a planted value comes through), and training goes on as if it had been measured."""
    other = [*RUN, "--algo", "grpo", "--steps", "1", "--grpo-lr", "1e-3"]
    fresh, borrowed, planted = tmp_path / "fresh", tmp_path / "borrowed", tmp_path / "planted"
    assert run_scale(*other, "--out", str(fresh)).returncode == 0
    assert summary_of(fresh)[0] == summary_of(reference)[0]
    shutil.copytree(reference, planted)
    summary = json.loads((planted / "summary.json").read_text())
    summary["stages"][0]["pass@1"] = 0.123
    (planted / "summary.json").write_text(json.dumps(summary))
    result = run_scale(*other, "--base-from", str(planted), "--out", str(borrowed))
    assert result.returncode == 0 and f"the base model's evaluation: {planted}'s" in result.stdout
    assert summary_of(borrowed)[0] == {**summary_of(fresh)[0], "pass@1": 0.123}
    assert summary_of(borrowed)[1:] == summary_of(fresh)[1:]


def test_base_from_reads_a_checkpoint_and_refuses_other_evaluation_settings(reference, tmp_path):
    """A run still going (a checkpoint, no summary) lends its base; a run whose evaluation would
    differ (its samples, its decoding dtype) or a folder with no evaluation is refused in one line,
    nothing written."""
    running = tmp_path / "running"
    shutil.copytree(reference, running)
    (running / "summary.json").unlink()
    checkpoint = torch.load(running / "checkpoint.pt", weights_only=False)
    # planted: only a base read from the checkpoint carries it
    checkpoint["stages"][0]["pass@1"] = 0.321
    torch.save(checkpoint, running / "checkpoint.pt")
    taken = tmp_path / "taken"
    assert run_scale(*RUN, "--steps", "2", "--base-from", str(running), "--out",
                     str(taken)).returncode == 0
    assert summary_of(taken)[0] == {**summary_of(reference)[0], "pass@1": 0.321}
    for flags, message in [(["--eval-samples", "32"], "its --eval-samples is 16, this run's 32"),
                           (["--rollout-dtype", "bfloat16"],
                            "its --rollout-dtype is 'model', this run's 'bfloat16'"),
                           (["--base-from", str(tmp_path / "taken" / "stage1-grpo")],
                            "no base evaluation there")]:
        out = tmp_path / "refused"
        result = run_scale(*RUN, "--base-from", str(running), *flags, "--out", str(out))
        assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_truncated_weights_file_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "truncated"
    shutil.copytree(es_grpo.TINY_MODEL, folder)
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[:len(weights) // 2])
    result = run_es_grpo("--model", str(folder), "--out", str(tmp_path / "never"))
    assert result.returncode == 2 and "cannot load a causal LM" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()


def test_a_run_that_fails_in_this_process_leaves_its_folder_free_to_resume(tmp_path, monkeypatch):
    """A run interrupted inside a process that lives on (a notebook, a test) releases its folder's
    lock, so --resume from the same process goes ahead."""
    out = tmp_path / "interrupted"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(es_grpo, "train_stage", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_scale(*RUN, "--steps", "2", "--out", str(out))
    resumed = run_scale("--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["stages"][-1]["name"] == "es"


def test_overwrite_replaces_a_finished_run_and_a_refused_overwrite_keeps_it(tmp_path):
    """es_grpo.py never writes into a folder that holds anything; scale.train's --overwrite replaces
    a run, after every input was read, and never a folder that holds no run."""
    out = tmp_path / "run"
    assert run_es_grpo(*SMALL_RUN, "--algo", "es", "--steps", "1", "--out",
                       str(out)).returncode == 0
    (out / "notes.txt").write_text("mine")
    for runner in (run_es_grpo, run_scale):
        again = runner(*SMALL_RUN, "--algo", "es", "--steps", "1", "--out", str(out))
        assert (again.returncode == 2 and "--overwrite" in again.stderr
                and (out / "notes.txt").exists())
    typo = ["--model", str(tmp_path / "typo")]
    refused = run_scale(*SMALL_RUN, "--algo", "es", *typo, "--overwrite", "--out", str(out))
    # a bad input never costs a saved run
    assert refused.returncode == 2 and (out / "notes.txt").exists()
    replaced = run_scale(*SMALL_RUN, "--algo", "grpo", "--steps", "1", "--overwrite", "--out",
                         str(out))
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert not (out / "notes.txt").exists() and [s["name"] for s
                                                 in summary_of(out)] == ["base", "grpo"]
    assert json.loads((out / "config.json").read_text())["algo"] == "grpo"
    mine = tmp_path / "mine"  # a folder no run made: never replaced, --overwrite or not
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    for flags in ([], ["--overwrite"]):
        runner = run_scale if flags else run_es_grpo
        refused = runner(*SMALL_RUN, "--algo", "es", "--steps", "1", *flags, "--out", str(mine))
        assert refused.returncode == 2 and (mine / "thesis.tex").exists()
        assert ("holds no run" if flags else "exists") in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    empty = tmp_path / "empty"  # an empty folder is no one's work: a run may go there
    empty.mkdir()
    assert run_es_grpo(*SMALL_RUN, "--algo", "es", "--steps", "1", "--out",
                       str(empty)).returncode == 0


def test_es_grpo_resumed_at_the_stage_boundary_ends_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """Interrupted just after the ES stage ended (its checkpoint says: stage 1 done, no stage
    state), then resumed: GRPO starts fresh from the ES weights, as in the uninterrupted run."""
    flags = [*SMALL_RUN, "--algo", "es-grpo"]
    assert run_scale(*flags, "--out", str(tmp_path / "whole")).returncode == 0
    train_stage = es_grpo.train_stage

    def stop_before_grpo(run, stage, *args):
        if stage.name == "grpo":
            raise KeyboardInterrupt
        return train_stage(run, stage, *args)

    monkeypatch.setattr(es_grpo, "train_stage", stop_before_grpo)
    with pytest.raises(KeyboardInterrupt):
        run_scale(*flags, "--out", str(tmp_path / "cut"))
    checkpoint = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    assert checkpoint["stage"] == 1 and checkpoint["stage_state"] is None
    monkeypatch.setattr(es_grpo, "train_stage", train_stage)
    resumed = run_scale("--resume", str(tmp_path / "cut"))
    assert resumed.returncode == 0 and "after update 1" in resumed.stdout
    a, b = (load_file(tmp_path / run / "stage2-grpo" / "model.safetensors") for run
            in ("whole", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert summary_of(tmp_path / "whole") == summary_of(tmp_path / "cut")


class ThreadRank(es_grpo.OneProcess):
    """One of two ranks, run as threads that share a barrier."""
    def __init__(self, rank: int, barrier: threading.Barrier):
        self.rank, self.world_size, self.is_main, self.shared = rank, 2, rank == 0, barrier

    def barrier(self):
        self.shared.wait(timeout=20)


def test_the_reference_folder_is_made_once_every_rank_has_looked(tmp_path):
    """es_grpo.RunFolder on two ranks (es_grpo.run with scale's ranks, as tests/dist_jobs.py's
    engine job runs it): a rank that reaches open() late must not find the folder the main rank has
    just made and refuse it as "run folder exists" (what a loaded CI machine did). Rank 1 looks only
    once rank 0 waits in create."""
    args, barrier, failures = es_grpo.Args(out=str(tmp_path / "run")), threading.Barrier(2), []

    def rank_run(rank: int):
        ranks, folder = ThreadRank(rank, barrier), es_grpo.RunFolder()
        try:
            while rank == 1 and barrier.n_waiting == 0:
                time.sleep(0.01)
            folder.create(folder.open(args, ranks), ranks)
        except BaseException as err:  # BadInput is a SystemExit; reported below
            failures.append(f"rank {rank}: {err}")
            barrier.abort()
    threads = [threading.Thread(target=rank_run, args=(rank,)) for rank in (0, 1)]
    [thread.start() for thread in threads]
    [thread.join(timeout=60) for thread in threads]
    assert not failures, failures
    assert json.loads((tmp_path / "run" / "config.json").read_text())["out"] == args.out
