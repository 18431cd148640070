"""Reuse that cannot lie. A reproduction's analyses take minutes to hours; a report is rewritten far
more often than they change. Each result is saved with a key of everything that decides its numbers:
the function's version (analyses.evaluation.versioned, bumped by hand when what it measures changes,
and guarded by tests/test_golden.py), its arguments, and each model's identity. A changed key
measures again; a model whose weights are not here (a report's committed runs keep their settings,
metrics and summaries, not their weights) is trained again first, from its own settings, without
its evaluations where its training comes out the same (training.weights_again)."""
from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
from pathlib import Path

import es_grpo
from analyses.training import run_results, train_again, weights_again
from es_grpo import log

WEIGHTS = ("*.safetensors", "*.bin", "*.pt")  # a model folder's weight files


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_folder(model: str) -> Path | None:
    """The finished run a model was trained by (its stage folder's parent), or None."""
    folder = Path(model).parent
    return (folder if (folder / "config.json").exists() and (folder / "summary.json").exists()
            else None)


def identity(model: str) -> str:
    """What decides a model's weights, readable without them. A run's model: the run's settings (its
    config.json, less where it was written) and its evaluations (summary.json, less timings): the
    same settings and seed give the same weights, and the evaluations tell a different training
    apart. A model folder: its weight files' bytes. Otherwise (a hub id): the name."""
    run = run_folder(model)
    if run is not None:
        config = {k: v for k, v in json.loads((run / "config.json").read_text()).items()
                  if k not in ("out", "overwrite")}
        return "run " + digest(json.dumps([config, run_results(run), Path(model).name],
                                          sort_keys=True))
    folder = es_grpo.TINY_MODEL if model in ("", "tiny") else Path(model)
    files = sorted(f for pattern in WEIGHTS for f
                   in folder.glob(pattern)) if folder.is_dir() else []
    if files:
        content = hashlib.sha256()
        for file in files:
            stat = file.stat()
            content.update(file_digest(str(file), stat.st_size, stat.st_mtime_ns))
        return "weights " + content.hexdigest()[:16]
    return "name " + model


@functools.lru_cache(maxsize=64)
def file_digest(path: str, size: int, modified: int) -> bytes:
    """A file's sha256, read once while its size and time stay (a model's weights, keyed for every
    analysis)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


def has_weights(model: str) -> bool:
    return any(any(Path(model).glob(pattern)) for pattern in WEIGHTS) or run_folder(model) is None


@dataclasses.dataclass
class Store:
    """Analyses saved in `folder` (OUT/analyses/reused), and, for the report, when each one used was
    made."""
    folder: Path
    made: dict = dataclasses.field(default_factory=dict)  # name -> when its result was measured
    # runs trained again, other evaluations
    evaluated_otherwise: list = dataclasses.field(default_factory=list)
    # measure nothing: an analysis not saved under its key now is named (BadInput)
    saved_only: bool = False

    def key(self, function, arguments: tuple, models: list[str]) -> dict:
        def plain(value):  # the arguments as JSON, each model by its identity, not its path
            if isinstance(value, str) and value in models:
                return identity(value)
            if dataclasses.is_dataclass(value):
                return plain(dataclasses.asdict(value))
            if isinstance(value, dict):
                return {str(k): plain(v) for k, v in value.items()}
            return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value
        if not isinstance(getattr(function, "version", None), int):
            raise TypeError(f"{function.__name__}: a saved analysis carries its version "
                            f"(analyses.evaluation.versioned)")
        return {"version": function.version, "function": function.__name__,
                "arguments": plain(arguments)}

    def get(self, name: str, models: list[str], function, *arguments):
        """function(*arguments), or the result saved under NAME with the same key. models: the model
        paths among the arguments (or inside them), each keyed by identity() and trained again if
        its weights are missing and the result must be measured (its evaluations too where its
        training comes out otherwise)."""
        path = self.folder / f"{name}.json"
        key = self.key(function, arguments, models)
        try:
            saved = json.loads(path.read_text())
            if saved["key"] == key:
                log(f"reproduce: {name} reused from {path} (made {saved['made']})")
                self.made[name] = saved["made"]
                return saved["result"]
        except (OSError, ValueError, KeyError, TypeError):
            saved = {}
        if self.saved_only:
            differ = ([part for part in key if saved.get("key", {}).get(part) != key[part]]
                      if saved else ["none"])
            raise es_grpo.BadInput(f"{path}: not saved under the key the code gives now (it "
                                   f"differs in: {', '.join(differ)}); without --saved-only, "
                                   f"reproduce measures it again")
        for run in dict.fromkeys(run_folder(m) for m in models if not has_weights(m)):
            if not (weights_again(run) or train_again(run)):
                self.evaluated_otherwise.append(run)
        # runs trained again: read their summaries again
        key = self.key(function, arguments, models)
        result = function(*arguments)
        made = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        self.folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "made": made, "result": result}, default=float))
        self.made[name] = f"{made} (this invocation)"
        # as a reuse would read it: the same types either way
        return json.loads(path.read_text())["result"]
