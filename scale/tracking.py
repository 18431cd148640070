"""Live metrics: --report-to tensorboard, trackio or wandb, beside metrics.jsonl.

metrics.jsonl stays the run's record; a tracker shows it as it grows. TrackedFolder (the run
folder hook, built by scale/assembly.py) reads each line the run appends and logs it under the
field's names, TRL's where one exists (`train/reward`, `train/kl`, ...: transformers' trackers
prefix a trainer's logs with `train/`), and each evaluation's Pass@K as `eval/...` at the update it
follows. One process logs (the main rank). Each tracker is an optional package
(scale/requirements-trackers.txt): a missing one is refused before anything starts (missing()).

    tensorboard: event files in RUN/tensorboard (tensorboard --logdir RUN/tensorboard)
    trackio:     its local store (TRACKIO_DIR, else ~/.cache/huggingface/trackio), project
                 es_grpo, the run named after its folder and start (RUN/tracker.json keeps it)
    wandb:       offline unless WANDB_MODE says otherwise, in RUN/wandb (wandb sync to upload)
"""
from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path

from es_grpo import stages_of
from scale.runs import ResumableFolder, atomic_write

INSTALL = "pip install -r scale/requirements-trackers.txt"
PROJECT = "es_grpo"
# metrics.jsonl's names -> the tracker's: TRL's GRPOTrainer's where it logs one; ES's own under es/
TRL_NAMES = {"reward": "train/reward", "reward_std": "train/reward_std", "loss": "train/loss",
             "entropy": "train/entropy", "kl": "train/kl",
             "clip_frac": "train/clip_ratio/region_mean",
             "zero_std_frac": "train/frac_reward_zero_std", "seconds": "train/seconds_per_update",
             "seq_per_s": "train/sequences_per_second", "tokens": "train/num_tokens",
             "reward_max": "es/member_reward_max", "disagreement": "es/disagreement"}
ES_NAMES = TRL_NAMES | {"reward_std": "es/member_reward_std"}  # the members' rewards' spread

def missing(tracker: str) -> str | None:
    """A line naming the install command if the tracker's package does not import, else None."""
    if tracker == "none":
        return None
    try:
        importlib.import_module(tracker)  # each tracker's package is named as the tracker
    except ImportError:
        return f"--report-to {tracker}: the {tracker} package is not installed ({INSTALL})"
    return None


def train_values(line: dict, previous: dict | None, run) -> dict[str, float]:
    """One metrics.jsonl line as the tracker's scalars. previous: the stage's line before it (its
    totals give this update's completion length)."""
    es, args = line["stage"] == "es", run.args
    names = ES_NAMES if es else TRL_NAMES
    values = {names[key]: float(value) for key, value in line.items()
              if key in names and isinstance(value, (int, float))}
    before = previous or {"sequences": 0, "tokens": 0}
    if line.get("sequences", 0) > before["sequences"]:
        values["train/completions/mean_length"] = ((line["tokens"] - before["tokens"])
                                                   / (line["sequences"] - before["sequences"]))
    if not es:
        return values | {"train/learning_rate": float(args.grpo_lr)}
    values |= {"es/sigma": float(args.es_sigma), "es/alpha": float(args.es_alpha)}
    if line.get("member_rewards"):
        values["es/member_reward_min"] = float(min(line["member_rewards"]))
    norm = getattr(run.es_update, "step_norm", None)  # scale/es.py's update measures it
    return values | ({"es/update_norm": norm} if norm is not None else {})


def eval_values(result: dict, prefix: str = "eval/") -> dict[str, float]:
    """An evaluation's Pass@K, Maj@K, entropy and held-out Pass@K as scalars."""
    return {prefix + key: float(value) for key, value in result.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            and key.startswith(("pass@", "maj@", "entropy", "heldout_pass@"))}


class Tracker:
    """One run's tracker: log(values, step), close(failed). Its name (and wandb's run id) is kept in
    RUN/tracker.json: --resume continues that tracker run, never another of the same name; a new
    run, or one made again with --overwrite, starts its own."""

    def __init__(self, kind: str, out: Path, config: dict, resumed: bool = False):
        record = out / "tracker.json"
        saved = json.loads(record.read_text()) if resumed and record.exists() else {}
        name = saved.get("name") or f"{out.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.kind = kind
        if kind == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(log_dir=str(out / "tensorboard"))
        elif kind == "trackio":
            import trackio
            self.writer = trackio.init(project=PROJECT, name=name, config=config,
                                       resume="allow" if saved else "never", embed=False)
        else:
            import wandb
            self.writer = wandb.init(project=PROJECT, name=name, id=saved.get("id"),
                                     resume="allow" if saved else None, dir=str(out),
                                     config=config, mode=os.environ.get("WANDB_MODE", "offline"))
            saved["id"] = self.writer.id
        atomic_write(record, lambda tmp: tmp.write_text(json.dumps(saved | {"name": name})))

    def log(self, values: dict[str, float], step: int):
        if self.kind == "tensorboard":
            for name, value in values.items():
                self.writer.add_scalar(name, value, step)
            self.writer.flush()  # a live view: each update's values on disk as it ends
        else:
            self.writer.log(values, step=step)

    def close(self, failed: bool):
        if self.kind == "tensorboard":
            self.writer.close()
        elif self.kind == "trackio":
            self.writer.finish()
        else:
            self.writer.finish(exit_code=int(failed))  # a run that raised shows as failed


class TrackedFolder(ResumableFolder):
    """ResumableFolder, and each line metrics.jsonl gets and each evaluation, sent to a tracker as
    the run writes them (the main process only). A resumed run logs from its first new update (the
    updates after its checkpoint again: the same values, resume being bit for bit)."""

    def __init__(self, report_to: str, *folder: object):
        super().__init__(*folder)
        self.report_to, self.tracker, self.read, self.previous = report_to, None, 0, {}
        self.base_due, self.stages, self.finished = False, 0, False

    def restore(self, run, schedule: list) -> tuple[list, int]:
        """The lines already in metrics.jsonl (a resumed run's, cut back to its checkpoint) are
        read, not logged again; the tracker starts here, before the base evaluation (a tracker that
        cannot start stops the run before it costs anything)."""
        restored = super().restore(run, schedule)
        for line in self.new_lines(run):
            self.previous[line["stage"]] = line
        self.base_due, self.stages = not self.previous, len(schedule)  # from its start: the base
        if run.ranks.is_main:
            config = {"report_to": self.report_to, **vars(run.args)}
            self.tracker = Tracker(self.report_to, Path(run.args.out), config, bool(self.resume))
        return restored

    def new_lines(self, run) -> list[dict]:
        path = Path(run.args.out) / "metrics.jsonl"
        if not path.exists():
            return []
        with path.open() as metrics:
            metrics.seek(self.read)
            text = metrics.read()
        complete = text[:text.rfind("\n") + 1]  # a line still being written waits
        self.read += len(complete.encode())
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def after_update(self, run, stage, results: list):
        super().after_update(run, stage, results)
        if not run.ranks.is_main:
            return
        if self.base_due:
            self.tracker.log(eval_values(results[0]), 0)
            self.base_due = False
        for line in self.new_lines(run):
            values = train_values(line, self.previous.get(line["stage"]), run)
            if isinstance(line.get("eval"), dict):
                values |= eval_values(line["eval"], "eval/trajectory/")
            self.tracker.log(values, line["update"])
            self.previous[line["stage"]] = line

    def after_stage(self, run, index: int, results: list):
        super().after_stage(run, index, results)
        self.finished = index + 1 == self.stages
        if run.ranks.is_main:
            step = sum(updates for _, updates in stages_of(run.args.algo,
                                                           run.args.steps)[:index + 1])
            self.tracker.log(eval_values(results[-1]), step)

    def close(self):
        try:
            if self.tracker is not None:
                self.tracker.close(failed=not self.finished)
        finally:
            self.tracker = None
            super().close()
