"""The bench's parts by name, and what a child process runs (`python -m scale.bench --child ...`):
one part, or one configuration whose peak memory or engine speed a part measures."""
from __future__ import annotations

import json

import torch

from scale.bench import engine, grading, noise, real, tasks, tiny

REAL = ("real-rollout", "real-es", "real-grpo", "real-memory", "real-vllm")  # --parts real: all
PARTS = ("es", "grpo", "eval", "memory", "growth", "profile", "precision", "verifier", "vllm",
         *REAL, "tasks", "rg-tasks", "noise")
COMPARISONS = {"es": tiny.bench_es, "grpo": tiny.bench_grpo, "eval": tiny.bench_eval,
               "memory": lambda repeats: tiny.bench_memory(), "vllm": engine.bench_vllm,
               "real-rollout": real.bench_real_rollout, "real-es": real.bench_real_es,
               "real-grpo": real.bench_real_grpo, "real-memory": real.bench_real_memory,
               "real-vllm": engine.bench_real_engine}  # rows of the comparison table
TABLES = {"growth": tiny.bench_growth, "profile": tiny.bench_profile,
          "precision": lambda repeats: tiny.bench_precision(), "verifier": grading.bench_verifier,
          "tasks": tasks.bench_tasks, "rg-tasks": tasks.bench_rg_tasks,
          "noise": noise.bench_noise}  # lines of their own


def measure(part: str, repeats: int) -> list:
    """One part's rows (a comparison's tuples) or lines (a table's)."""
    return (COMPARISONS.get(part) or TABLES[part])(repeats)


def child(kind: str, size: str, repeats: str = "1"):
    """Run one configuration and print its peak resident set (in a fresh process, so peaks do not
    mix); or ("part", NAME, REPEATS) one part's rows, as JSON."""
    if kind == "part":
        torch.set_num_threads(2)
        return print(json.dumps(measure(size, int(repeats))))
    if kind in engine.KINDS and size in ("tiny", "52M"):
        return engine.vllm_child(kind, size, int(repeats))
    if kind in engine.KINDS and size in ("real-float32", "real-bfloat16"):
        return engine.real_engine_child(kind, size.split("-")[1], int(repeats))
    if size == "real" and kind in ("inference", "es-off", "es-on", "grpo"):
        return real.real_child(kind)
    if kind not in ("inference", "es", "es-off", "grpo") or size not in ("tiny", "60M"):
        raise SystemExit(f"--child: no configuration {kind} {size}")
    return tiny.memory_child(kind, size)
