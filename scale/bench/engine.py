"""vLLM's engine against the transformers paths, each configuration in a process of its own: on the
tiny model and a 52M one built from a config against es_grpo.rollout (part vllm), and on the real
model against the HF path (part real-vllm)."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import tempfile

import torch

import es_grpo
from scale.assembly import context
from scale.bench.harness import in_child, peak_rss_mb, timed, tiny_setup
from scale.bench.real import REAL_FOLDER, real_setup
from scale.gpu_check import CheckArgs, build

KINDS = ("hf-generate", "vllm-generate", "hf-es", "vllm-es")  # what an engine child measures


def vllm_setup(size: str):
    """The tiny model, or the 52M-parameter model built from a config (random weights: every
    completion runs to max_new_tokens), saved where an engine can load it; tiny's tokenizer, its
    default settings, and the prompts of one ES iteration (64 prompts x 32 members, greedy)."""
    model, tokenizer, args, problems = tiny_setup()
    if size == "52M":
        model = build(CheckArgs(hidden=512, layers=12), torch.float32, "cpu")
    folder = tempfile.mkdtemp(prefix="bench_vllm_")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]]
    return model, tokenizer, args, problems, folder, prompts * args.es_population


def vllm_child(kind: str, size: str, repeats: int):
    """One of hf-generate, vllm-generate, hf-es, vllm-es on `size`: median seconds and tokens of
    `repeats` runs after a warm-up, and the process's peak RSS (the engine's KV cache included:
    VLLM_CPU_KVCACHE_SPACE). hf-...: es_grpo.rollout as written (--rollout plain)."""
    torch.set_num_threads(2)
    model, tokenizer, args, problems, folder, prompts = vllm_setup(size)
    engine = launched_engine(folder, "float32", 64) if kind.startswith("vllm") else None
    measure_child(kind, (model, tokenizer, args, problems), engine, "plain", prompts,
                  args.sampling("es", 0), repeats)


def real_engine_child(kind: str, dtype: str, repeats: int):
    """On the real model in `dtype`, the HF path (scale/decode.py) or vLLM's engine: 64 prompts,
    greedy, <= 64 new tokens (hf-generate, vllm-generate), or one ES update of N=16 x 16 prompts,
    greedy, <= 48 new tokens (hf-es: the automatic path; vllm-es: members inside the engine)."""
    torch.set_num_threads(2)
    model, tokenizer, args, problems = real_setup(dtype)
    args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:64]]
    engine = launched_engine(REAL_FOLDER, dtype, 256) if kind.startswith("vllm") else None
    measure_child(kind, (model, tokenizer, args, problems), engine, "hf", prompts,
                  es_grpo.Sampling(max_new_tokens=64), repeats)


def launched_engine(folder: str, dtype: str, max_seqs: int):
    """vLLM's engine on folder, started (its CPU build: a KV cache of VLLM_CPU_KVCACHE_SPACE GiB, 1
    unless set)."""
    from scale.vllm_rollout import EngineSettings, VLLMRollout
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    engine = VLLMRollout.launch(EngineSettings(folder, dtype, 0.5, max_seqs, 8192, 256, 0, 600))
    engine.start()
    return engine


def measure_child(kind: str, setup: tuple, engine, rollout: str, prompts: list[str], sampling,
                  repeats: int):
    """Print median seconds and tokens of `repeats` runs after a warm-up, and peak RSS: a generation
    of prompts (kind ...-generate) or an ES update of args.es_population x args.es_prompts (...-es).
    engine: a started vLLM engine (vllm-...: --rollout vllm, members inside the engine, one at a
    time); None: --rollout `rollout`, the population on the automatic path."""
    model, tokenizer, args, problems = setup
    if engine is not None:
        in_engine = dataclasses.replace(args, rollout="vllm", es_batched="off")
        run = context(in_engine, model, tokenizer, engine)
    else:
        decoded = dataclasses.replace(args, rollout=rollout, es_batched="auto")
        run = context(decoded, model, tokenizer)
    if kind.endswith("generate"):
        def measured():
            return run.generate(model, tokenizer, prompts, sampling).tokens
    else:
        params, counter = list(model.parameters()), iter(range(10**6))
        members = run.es_weights(model) if run.es_weights else params  # as es_grpo.run sets them
        state = es_grpo.ESState(members, es_grpo.master_weights(params))

        def measured():
            return es_grpo.es_step(run, state, problems[:args.es_prompts], next(counter))["tokens"]
    tokens = [measured()]  # the warm-up
    seconds = [timed(lambda: tokens.append(measured())) for _ in range(repeats)]
    print(json.dumps({"seconds": statistics.median(seconds), "tokens": tokens[-1],
                      "rss_mb": peak_rss_mb(),
                      "params_m": sum(p.numel() for p in model.parameters()) / 1e6}))
    if engine is not None:
        engine.shutdown()


def bench_real_engine(repeats: int) -> list[tuple]:
    """vLLM's CPU engine against the HF path on the real model, float32 and bfloat16, each in its
    own process."""
    if importlib.util.find_spec("vllm") is None:
        return [("vLLM engine on the real model", float("nan"), 1.0, "",
                 "not measured: vLLM is not installed")]
    rows = []
    for dtype in ("float32", "bfloat16"):
        hf, engine = (in_child(kind, f"real-{dtype}", str(min(repeats, 2)))
                      for kind in ("hf-generate", "vllm-generate"))
        rows.append((f"rollout tokens/s, HF path / vLLM CPU engine, {dtype} "
                     "(SmolLM2-135M-Instruct, 64 prompts, greedy, <= 64 new)",
                     hf["tokens"] / hf["seconds"], engine["tokens"] / engine["seconds"], ">= 0.5",
                     f"peak RSS MB: {hf['rss_mb']:.0f} / {engine['rss_mb']:.0f}"))
    hf, engine = (in_child(kind, "real-bfloat16", "1") for kind in ("hf-es", "vllm-es"))
    rows.append(("ES update s, HF path / members inside the vLLM CPU engine, bfloat16 (N=16 x 16 "
                 "prompts, greedy, <= 48 new)", hf["seconds"], engine["seconds"], "reported",
                 f"peak RSS MB: {hf['rss_mb']:.0f} / {engine['rss_mb']:.0f}"))
    return rows


def bench_vllm(repeats: int) -> list[tuple]:
    """vLLM's engine (its CPU build here: float32, enforce_eager, VLLM_CPU_KVCACHE_SPACE=1) against
    es_grpo.rollout on the same 2,048 greedy rows; one ES iteration inside the engine (a reload per
    member) against the transformers path (population-batched where it fits); each in its own
    process."""
    if importlib.util.find_spec("vllm") is None:
        raise RuntimeError("vLLM is not installed (scale/README.md, Install)")
    rows = []
    for size in ("tiny", "52M"):
        measured = {kind: in_child(kind, size, str(repeats)) for kind in KINDS}
        label = f"{size} ({measured['hf-generate']['params_m']:.1f}M parameters)"
        rate = {kind: m["tokens"] / m["seconds"] for kind, m in measured.items()}
        rss = {kind: f"{m['rss_mb']:.0f}" for kind, m in measured.items()}
        rows.append((f"tokens/s, vLLM engine / es_grpo.rollout, {label}, 2,048 greedy rows",
                     rate["vllm-generate"], rate["hf-generate"], "reported",
                     f"peak RSS MB: {rss['vllm-generate']} / {rss['hf-generate']}"))
        rows.append((f"ES iteration s, --rollout vllm / --rollout hf, {label}, N=32 x 64 prompts",
                     measured["vllm-es"]["seconds"], measured["hf-es"]["seconds"], "reported",
                     f"peak RSS MB: {rss['vllm-es']} / {rss['hf-es']}"))
    return rows
