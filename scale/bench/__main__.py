"""Speed and memory of es_grpo.py against their physical limits and against TRL, side by side.

    python -m scale.bench                 # installs trl==1.16.0 if missing; the markdown table
    python -m scale.bench --repeats 3     # fewer alternations
    python -m scale.bench --parts precision   # a bfloat16 engine's sampling against fp32 GRPO
    python -m scale.bench --parts verifier    # verifier seconds per 1,000 completions; its
                                              # share of a step
    python -m scale.bench --parts vllm        # the vLLM engine against es_grpo.rollout (where
                                              # vLLM is installed)
    python -m scale.bench --parts real        # SmolLM2-135M-Instruct (python -m scale.real_model):
                                              # real-rollout, real-es, real-grpo, real-memory,
                                              # real-vllm
    python -m scale.bench --parts tasks       # the real model on candidate task families (how its
                                              # task was chosen)
    python -m scale.bench --parts rg-tasks    # the same on reasoning-gym's (scale/gym.py)

Run it from the repository's root (it starts its children and any re-execution as `-m scale.bench`
there). Compared commands alternate (A, B, A, B, ...) so that drift in the machine hits both; each
figure is a median over the repeats, after one warm-up of each. Memory is the peak resident set of a
separate process per configuration. Each part prints its rows as soon as they are measured; a part
that fails says so in one line, the others still run, and the exit status is 1. Not part of the
test suite (its smoke test, tests/test_docs.py, runs one part at --repeats 1).
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import torch

from scale.bench.harness import ROOT, TRL, in_child, print_measured
from scale.bench.parts import COMPARISONS, PARTS, REAL, child, measure


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m scale.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="alternations of each comparison")
    own_installs = ("vllm", *REAL, "tasks", "rg-tasks")
    parser.add_argument("--parts", default=",".join(p for p in PARTS if p not in own_installs),
                        help=f"which comparisons to run, comma-separated: {', '.join(PARTS)} "
                             "(default: all but vllm, real, tasks and rg-tasks, which need "
                             "their own installs)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    flags = parser.parse_args(argv)
    if flags.child:
        return child(*flags.child)
    parts = [part for name in flags.parts.split(",")
             for part in (REAL if name == "real" else [name])]
    unknown = set(parts) - set(PARTS)
    if unknown or flags.repeats < 1:
        parser.error(f"--parts: the parts are {', '.join(PARTS)}; --repeats at least 1"
                     + (f" (not {', '.join(sorted(unknown))})" if unknown else ""))
    try:
        if "grpo" in parts or "real-grpo" in parts:  # against TRL's GRPOTrainer
            import trl  # noqa: F401
    except ImportError:
        # install, then start again: transformers decided at import that accelerate is missing
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", TRL], check=True)
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "scale.bench", *argv])
    torch.set_num_threads(2)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout
    print(f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}; commit {commit.strip()}; medians of "
          f"{flags.repeats} alternations", flush=True)
    failed, header = [], False
    for part in parts:
        tick = time.time()
        # a real-model part beside others runs in a process of its own: together they outgrow 24 GB
        alone = part in REAL and len(parts) > 1
        try:
            measured = (in_child("part", part, str(flags.repeats)) if alone
                        else measure(part, flags.repeats))
        except Exception as error:  # one line, and the other parts still run
            print(f"part {part} failed after {time.time() - tick:.0f} s: "
                  f"{type(error).__name__}: {error}", flush=True)
            failed.append(part)
            continue
        header = print_measured(measured, part in COMPARISONS, header)
        print(f"(part {part}: {time.time() - tick:.0f} s)", flush=True)
    if failed:
        sys.exit(f"parts that failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
