"""Run folders: the machinery behind es_grpo.py's --out, --overwrite, --resume and its checkpoints, kept out of
the reference file so that it shows only the ideas.

Every --save-every updates and after each stage, RUN/checkpoint.pt (weights, the stage's state, RNG states,
evaluations so far) is replaced atomically; --resume continues from it to the result of an uninterrupted run
(tests/test_reliability.py: test_sigkill_then_resume_is_bit_identical_...). Nothing is written before every
input has been read and checked (es_grpo.run): a run refused for bad data or a bad model leaves no folder.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import torch


class BadInput(SystemExit):
    """A data file, model or run folder that cannot be used: one line naming it on stderr, said when raised
    (so every entry point, es_grpo.py, eval.py or scale/train.py, says it), and exit status 2 as for a bad
    flag. A SystemExit, so that no traceback follows it."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message
        print(f"error: {message}", file=sys.stderr, flush=True)

    def __str__(self) -> str:
        return self.message


def atomic_write(path: Path, write):
    """write(temporary path), then rename: a crash never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def open_run_folder(args):
    """(args, checkpoint): with --resume, the saved config and last checkpoint of an interrupted run; else
    args as given, once --out is known to be free (or --overwrite given). Reads only."""
    if args.resume:
        folder = Path(args.resume)
        try:
            saved = json.loads((folder / "config.json").read_text())
            path = folder / "checkpoint.pt"
            checkpoint = torch.load(path, weights_only=False) if path.exists() else None
        except (OSError, ValueError, RuntimeError) as err:
            raise BadInput(f"--resume {folder}: not a resumable run folder ({err.__class__.__name__})") from None
        known = {f.name: saved[f.name] for f in dataclasses.fields(args) if f.name in saved}  # not "scale"
        return type(args)(**{**known, "resume": str(folder), "out": str(folder)}), checkpoint
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.overwrite:
        raise BadInput(f"--out {out}: run folder exists; pass --resume {out} to continue it or --overwrite to "
                       "replace it")
    return args, None


def create_run_folder(args, ranks):
    """An empty --out holding config.json (the launcher's settings too, for --resume)."""
    out = Path(args.out)
    ranks.barrier()  # every process has looked before the main one writes
    if ranks.is_main:
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        out.mkdir(parents=True)
        config = dataclasses.asdict(args) | ({"scale": ranks.config} if ranks.config else {})
        atomic_write(out / "config.json", lambda tmp: tmp.write_text(json.dumps(config, indent=2)))
    ranks.barrier()


def save_checkpoint(out: Path, model, stage: int, stage_state: dict | None, stages: list, ranks):
    if ranks.is_main:  # every process holds the same weights: one writes them
        rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
        state = {"model": model.state_dict(), "stage": stage, "stage_state": stage_state, "stages": stages,
                 "rng": rng}
        atomic_write(out / "checkpoint.pt", lambda tmp: torch.save(state, tmp))


def resume_metrics(out: Path, schedule: list, checkpoint: dict | None, ranks):
    """Drop metrics.jsonl's lines after the checkpoint's update: the resumed run writes them again."""
    done = 0
    if checkpoint:
        in_stage = (checkpoint["stage_state"] or {}).get("update", 0)
        done = sum(updates for _, updates in schedule[:checkpoint["stage"]]) + in_stage
    if ranks.is_main:
        lines = (out / "metrics.jsonl").read_text().splitlines() if (out / "metrics.jsonl").exists() else []
        kept = [line for line in lines if line.strip() and json.loads(line)["update"] <= done]
        atomic_write(out / "metrics.jsonl", lambda tmp: tmp.write_text("".join(line + "\n" for line in kept)))
    ranks.log(f"resuming {out} after update {done}")
