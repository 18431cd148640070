"""Run folders that survive a crash: es_grpo.run's `folder` hook, for long runs (scale.train,
eval.py).

es_grpo.RunFolder makes --out afresh and writes the run's files as it goes. ResumableFolder adds:
- a checkpoint every --save-every updates and after each stage, RUN/checkpoint.pt (the weights, the
  stage's state: ES's fp32 master or GRPO's AdamW and reference, the RNG states, the evaluations so
  far), replaced atomically (a temporary name, then a rename);
- --resume RUN: the saved config and last checkpoint, to the result of an uninterrupted run bit for
  bit, even after SIGKILL (tests/test_reliability.py); metrics.jsonl keeps each update once;
- a lock held for the run's life: a second run of the same folder, or an --overwrite of it, is
  refused in one line; the folder is made whole in a staging folder and renamed into place, so two
  runs started at once leave one run and one refusal;
- --base-from RUN: the base model's evaluation taken from another run (its summary, else its
  checkpoint) in place of measuring it again, where every setting that reaches that evaluation is
  the same (a frontier of learning rates, or ES beside GRPO, share it: with 100 problems x 64
  samples it is a run's longest evaluation).
Nothing is written before every input has been read and checked.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from es_grpo import Args, BadInput, Context, ESState, RunFolder, Stage, set_weights
from scale.config import LAUNCH, saved_settings
from scale.distributed import grpo_state, load_grpo_state


def atomic_write(path: Path, write):
    """write(temporary path), then rename: a crash never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def hold(folder: Path):
    """The run folder's lock, held until the process ends (or the file closes); BadInput if a live
    process holds it."""
    lock = open(folder / "lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise BadInput(f"{folder}: a running process holds this run folder") from None
    return lock


class ResumableFolder(RunFolder):
    """es_grpo.RunFolder's contract, with checkpoints, --resume and a lock (module docstring).
    resume: the run folder to continue ("": a new run in --out); save_every: updates between
    checkpoints (0: after each stage only); base_from: a run whose base evaluation this one takes
    ("": measure it)."""

    def __init__(self, resume: str = "", save_every: int = 10, base_from: str = ""):
        self.resume, self.save_every, self.locks, self.checkpoint = resume, save_every, [], None
        self.base_from, self.base = base_from, None
        self.es_paths = []  # the ES scorer's paths so far (scale/es.py), in config.json

    def open(self, args: Args, ranks) -> Args:
        """open_folder's settings, and with --base-from that run's base evaluation (read before
        anything is written; a checkpoint to resume from holds its own)."""
        args = self.open_folder(args, ranks)
        if self.base_from and not self.checkpoint:
            self.base = borrowed_base(Path(self.base_from), args)
        return args

    def open_folder(self, args: Args, ranks) -> Args:
        """With --resume: the saved config, with the last checkpoint kept and the lock held; else
        args as given, once --out is known to be free, or to hold a run and --overwrite given
        (create replaces it)."""
        if not self.resume:  # --overwrite (scale/config.py's) of a run folder: create() replaces it
            replaced = getattr(args, "overwrite",
                               False) and (Path(args.out) / "config.json").is_file()
            return args if replaced else super().open(args, ranks)
        folder = Path(self.resume)
        try:
            saved = saved_settings(json.loads((folder / "config.json").read_text()))
            self.es_paths = list(saved.get("es_paths", []))
            self.locks.append(hold(folder) if ranks.is_main else None)
            path = folder / "checkpoint.pt"
            self.checkpoint = torch.load(path, weights_only=False) if path.exists() else None
        except (OSError, ValueError, RuntimeError) as err:
            raise BadInput(f"--resume {folder}: not a resumable run folder "
                           f"({err.__class__.__name__})") from None
        known = {f.name: saved[f.name] for f in dataclasses.fields(args)
                 if f.name in saved and f.name not in LAUNCH}
        launch = {name: getattr(args, name) for name in LAUNCH if hasattr(args, name)}
        return type(args)(**{**known, **launch, "out": str(folder)})

    def create(self, args: Args, ranks):
        """--out, holding config.json (the launcher's settings too, for --resume), made whole in a
        staging folder and renamed into place (a rename fails if another run made it first); its
        lock kept."""
        if self.resume:
            return
        out = Path(args.out)
        ranks.barrier()  # every process has looked before the main one writes
        if ranks.is_main:
            if out.is_dir() and any(out.iterdir()):  # --overwrite: unless a live run holds it
                hold(out).close()
                shutil.rmtree(out)
            elif out.exists() and not out.is_dir():
                out.unlink()
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
            self.locks.append(hold(staging))
            (staging / "config.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
            try:
                os.rename(staging, out)
            except OSError:
                shutil.rmtree(staging)
                raise BadInput(f"--out {out}: another run made this folder first") from None
        ranks.barrier()

    def restore(self, run: Context, schedule: list) -> tuple[list, int]:
        """The stages' results so far and the stage to continue, the model as the checkpoint left
        it; metrics.jsonl cut back to the checkpoint's update (the resumed run writes the rest)."""
        checkpoint, done = self.checkpoint, 0
        if checkpoint:
            run.model.load_state_dict(checkpoint["model"])
            in_stage = (checkpoint["stage_state"] or {}).get("update", 0)
            done = sum(updates for _, updates in schedule[:checkpoint["stage"]]) + in_stage
        if self.resume:
            path = Path(run.args.out) / "metrics.jsonl"
            if run.ranks.is_main:
                lines = path.read_text().splitlines() if path.exists() else []
                kept = "".join(line + "\n" for line in lines if line.strip()
                               and json.loads(line)["update"] <= done)
                atomic_write(path, lambda tmp: tmp.write_text(kept))
            run.ranks.log(f"resuming {run.args.out} after update {done}")
        if checkpoint:
            return checkpoint["stages"], checkpoint["stage"]
        if self.base:
            run.ranks.log(f"the base model's evaluation: {self.base_from}'s (the same settings)")
            return [self.base], 0
        return [], 0

    def resume_stage(self, run: Context, stage: Stage):
        """The checkpoint's stage continues where it was saved: its updates taken, costs, problem
        draws, and ES's master or GRPO's AdamW and reference."""
        saved = (self.checkpoint and self.checkpoint["stage"] == stage.index
                 and self.checkpoint["stage_state"])
        if not saved:
            return
        stage.done, stage.totals = saved["update"], saved["totals"]
        stage.rng.setstate(saved["rng"])
        if isinstance(stage.state, ESState):
            stage.state.master = saved["master"]
        else:
            load_grpo_state(run.ranks, stage.state, saved)

    def after_update(self, run: Context, stage: Stage, results: list):
        self.record_es_path(run)
        if stage.done == stage.updates or (self.save_every and stage.done % self.save_every == 0):
            self.save(run, stage.index, stage_state(run, stage), results)

    def record_es_path(self, run: Context):
        """config.json's es_paths: each path the ES scorer took (batched, summed, kept, redrawn),
        in the order first taken."""
        path = getattr(run.score_members, "path", None)
        if path is None or path in self.es_paths or not run.ranks.is_main:
            return
        self.es_paths.append(path)
        config = Path(run.args.out) / "config.json"
        saved = json.loads(config.read_text()) | {"es_paths": self.es_paths}
        atomic_write(config, lambda tmp: tmp.write_text(json.dumps(saved, indent=2)))

    def after_stage(self, run: Context, index: int, results: list):
        self.save(run, index + 1, None, results)

    @staticmethod
    def save(run: Context, index: int, saved_stage: dict | None, results: list):
        if run.ranks.is_main:  # every process holds the same weights: one writes them
            rng = {"python": random.getstate(), "numpy": np.random.get_state(),
                   "torch": torch.get_rng_state()}
            state = {"model": run.model.state_dict(), "stage": index, "stage_state": saved_stage,
                     "stages": results, "rng": rng}
            atomic_write(Path(run.args.out) / "checkpoint.pt", lambda tmp: torch.save(state, tmp))

    def close(self):
        for lock in filter(None, self.locks):
            lock.close()
        self.locks = []


# What never reaches the base model's evaluation: training's settings, where the run is kept, how
# often it is
# checkpointed or checked (es_* and grpo_* too: how ES's members are batched, how GRPO is sharded).
TRAINING_ONLY = {*LAUNCH, "algo", "steps", "preset", "eval_every", "trajectory_samples",
                 "vllm_memory"}


def evaluation_settings(settings: dict) -> dict:
    """The settings that reach the base model's evaluation (ES's and GRPO's own: none of them)."""
    return {name: value for name, value in settings.items()
            if name not in TRAINING_ONLY and not name.startswith(("es_", "grpo_"))}


def borrowed_base(source: Path, args: Args) -> dict:
    """The base model's evaluation of the run in source (its summary, else its latest checkpoint),
    for a run whose every evaluation setting is that run's (a flag newer than it: its default);
    else BadInput naming the first that differs, or saying that source has no base evaluation
    yet."""
    try:
        saved = saved_settings(json.loads((source / "config.json").read_text()))
        summary, checkpoint = source / "summary.json", source / "checkpoint.pt"
        stages = (json.loads(summary.read_text()) if summary.exists() else
                  torch.load(checkpoint, weights_only=False, mmap=True))["stages"]
    except (OSError, ValueError, RuntimeError, KeyError):
        raise BadInput(f"--base-from {source}: no base evaluation there (a run folder with a "
                       f"summary or a checkpoint)") from None
    defaults = {f.name: f.default for f in dataclasses.fields(args)}
    mine, theirs = evaluation_settings(dataclasses.asdict(args)), defaults | saved
    for name, value in mine.items():
        if theirs.get(name, "not recorded") != value:
            raise BadInput(f"--base-from {source}: its --{name.replace('_', '-')} is "
                           f"{theirs.get(name, 'not recorded')!r}, this run's {value!r}, so its "
                           f"base evaluation is not this run's")
    return stages[0]


def stage_state(run: Context, stage: Stage) -> dict:
    """What a checkpoint keeps of a stage (every process takes part: GRPO's state may be a
    collective)."""
    kept = {"update": stage.done, "totals": stage.totals, "rng": stage.rng.getstate()}
    if isinstance(stage.state, ESState):  # the model takes the master's values before it is saved
        set_weights(list(run.model.parameters()), stage.state.master)
        return kept | {"master": stage.state.master}
    return kept | grpo_state(run.ranks, stage.state)
