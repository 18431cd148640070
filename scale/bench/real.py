"""A real model, SmolLM2-135M-Instruct (`python -m scale.real_model`): rollout speed against this
CPU's ceiling (real-rollout), an ES iteration (real-es), GRPO against TRL (real-grpo) and peak
memory (real-memory), each decoding on the HF path (scale/decode.py) as a run with --rollout hf."""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import statistics
from pathlib import Path

import torch

import es_grpo
from scale import config
from scale.assembly import context
from scale.bench.harness import (ROOT, alternate, grpo_runner, in_child, peak_rss_mb, timed,
                                 trl_steps)

REAL_FOLDER = os.environ.get("ES_GRPO_REAL_MODEL", str(ROOT / "models" / "SmolLM2-135M-Instruct"))


def real_setup(dtype: str = "float32"):
    """SmolLM2-135M-Instruct (`python -m scale.real_model`) on its task, two-digit sums: model,
    tokenizer, scale's flags for it, and 512 training problems."""
    if not (Path(REAL_FOLDER) / "config.json").is_file():
        raise RuntimeError(f"no model folder at {REAL_FOLDER}: python -m scale.real_model "
                           "(docs/real-model.md)")
    model, tokenizer = es_grpo.load_model(REAL_FOLDER, "cpu", dtype)
    args = config.parse_args(["--model", REAL_FOLDER, "--task", "add", "--rollout-batch", "512"])
    problems = es_grpo.generate_problems("add", 512, seed=11, exclude=es_grpo.never_trained_on())
    return model.eval(), tokenizer, args, problems


def ceiling(model, rows: int) -> dict:
    """This CPU's own limit for a decode step of `rows` rows: one pass over every Linear of the
    model (its weights read from memory, as a step reads them; plain and oneDNN-prepacked kernels,
    the faster) and a read of every weight (memory bandwidth). Attention, norms and sampling are
    left out: an upper bound."""
    from scale.decode import PackedLinears, cpu_has_bfloat16, packed_linear
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    dtype = linears[0].weight.dtype
    inputs = {n: torch.randn(rows, n, dtype=dtype)
              for n in {layer.in_features for layer in linears}}
    packs = PackedLinears()
    kernels = {"plain": lambda: [torch.nn.functional.linear(inputs[m.in_features], m.weight)
                                 for m in linears]}
    if dtype != torch.float32 and cpu_has_bfloat16():
        packed = [(packs.pack(m, rows), m) for m in linears]
        kernels["packed"] = lambda: [packed_linear(p, None, inputs[m.in_features])
                                     for p, m in packed]
    with torch.no_grad():
        seconds = min(statistics.median(timed(kernel) for _ in range(5))
                      for kernel in kernels.values())
        weights = [p for p in model.parameters()]
        read = statistics.median(timed(lambda: [p.sum() for p in weights]) for _ in range(5))
    flops = 2 * rows * sum(m.weight.numel() for m in linears)
    size = sum(p.numel() * p.element_size() for p in weights)
    return {"tokens_per_s": rows / seconds, "gflops": flops / seconds / 1e9,
            "gb_per_s": size / read / 1e9,
            "bandwidth_tokens_per_s": rows / read}  # rows a step, a step reading every weight once


def generate_tokens(model, tokenizer, prompts: list[str], new_tokens: int,
                    forced: bool = False) -> int:
    """transformers' own model.generate, greedy (forced: every row to new_tokens); the tokens it
    generated, each row up to and including its first end-of-turn id."""
    encoded = tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**encoded, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens if forced else 0, do_sample=False,
                             eos_token_id=es_grpo.eos_ids(model, tokenizer))
    new = out[:, encoded["input_ids"].shape[1]:]  # (B, T)
    ended = torch.isin(new, torch.tensor(es_grpo.eos_ids(model, tokenizer)))
    after = (ended.cumsum(1) - ended.long()) > 0  # positions past the first end
    return new.numel() if forced else int((~after).sum())


def hf_path(args, model, tokenizer):
    """The generate hook of a run with these flags and --rollout hf: the HF path
    (scale/decode.py)."""
    return context(dataclasses.replace(args, rollout="hf"), model, tokenizer).generate


def bench_real_rollout(repeats: int) -> list[tuple]:
    """Rollout tokens/s on SmolLM2-135M-Instruct, float32 and bfloat16: es_grpo.rollout, the HF
    path (scale/decode.py) and transformers' generate, against es_grpo.rollout at float32 and this
    CPU's ceiling."""
    repeats, rows, new_tokens = min(repeats, 2), [], 64
    models = {dtype: real_setup(dtype) for dtype in ("float32", "bfloat16")}
    _, tokenizer, _, problems = models["float32"]
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:64]]
    greedy = es_grpo.Sampling(max_new_tokens=new_tokens, batch_size=512)
    tokens, decoders = {}, {}
    for dtype, (model, _, args, _) in models.items():
        decoders[f"es_grpo.rollout {dtype}"] = \
            lambda m=model: es_grpo.rollout(m, tokenizer, prompts, greedy).tokens
        decoders[f"HF path (scale/decode.py) {dtype}"] = \
            lambda m=model, a=args: hf_path(a, m, tokenizer)(m, tokenizer, prompts, greedy).tokens
        decoders[f"transformers generate {dtype}"] = \
            lambda m=model: generate_tokens(m, tokenizer, prompts, new_tokens)
    seconds = alternate({name: lambda name=name, f=f: tokens.__setitem__(name, f())
                         for name, f in decoders.items()}, repeats)
    rate = {name: tokens[name] / seconds[name] for name in decoders}
    limits = {dtype: ceiling(model, len(prompts)) for dtype, (model, *_) in models.items()}
    for name in decoders:
        dtype = name.rsplit(" ", 1)[1]
        limit = limits[dtype]
        rows.append((f"rollout tokens/s, {name} / es_grpo.rollout float32 (64 prompts, greedy, "
                     f"<= {new_tokens} new)", rate[name], rate["es_grpo.rollout float32"],
                     ">= 5 (HF path bfloat16)" if "HF" in name else "",
                     f"{rate[name] / limit['tokens_per_s']:.1%} of the {dtype} "
                     f"matmul ceiling ({limit['tokens_per_s']:.0f} tokens/s, "
                     f"{limit['gflops']:.0f} GFLOP/s); memory-bound ceiling "
                     f"{limit['bandwidth_tokens_per_s']:.0f} tokens/s at "
                     f"{limit['gb_per_s']:.1f} GB/s"))
    return rows


def bench_real_es(repeats: int) -> list[tuple]:
    half, full = real_setup("bfloat16"), real_setup("float32")
    return (real_es(half, full, min(repeats, 2)) + real_es_noise(half, full, min(repeats, 2))
            + member_decode(half, min(repeats, 2)))


def member_decode(half, repeats: int) -> list[tuple]:
    """One ES member's decode (the model perturbed at real_es_noise's sigma; 16 prompts, greedy,
    <= 48 new tokens, bfloat16, its packs made again first as a member's are), new tokens through
    scale/decode_step.py's step against the model's forward, beside what holds a step: this CPU's
    products alone at 16 rows and one read of every weight (ceiling)."""
    model, tokenizer, args, problems = half
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:16]]
    greedy = dataclasses.replace(args, max_new_tokens=48).sampling("es", 0)
    stepped, forward = hf_path(args, model, tokenizer), hf_path(args, model, tokenizer)
    forward.stepped, steps, params = False, [], list(model.parameters())
    master = es_grpo.master_weights(params)
    es_grpo.set_weights(params, master, 1, args.es_sigma)

    def member(generate):
        with torch.no_grad():
            for p in params:
                p.add_(0)  # a new version: the packs are made again
        steps.append(generate(model, tokenizer, prompts, greedy).completion_ids.shape[1])
    seconds = alternate({"step": lambda: member(stepped), "forward": lambda: member(forward)},
                        repeats)
    es_grpo.set_weights(params, master)
    limit, count = ceiling(model, 16), statistics.median(steps)
    products, read = 16 / limit["tokens_per_s"], 16 / limit["bandwidth_tokens_per_s"]
    return [("ES member decode s, new tokens through scale/decode_step.py / through the model's "
             "forward (16 prompts, greedy, <= 48 new tokens, bfloat16)", seconds["step"],
             seconds["forward"], "< 1",
             f"{count:.0f} steps: {seconds['step'] / count * 1e3:.1f} ms a step with the prompts' "
             f"pass, against the products alone at 16 rows {products * 1e3:.1f} ms "
             f"({limit['gflops']:.0f} GFLOP/s) and one read of every weight {read * 1e3:.1f} ms")]


NOISE_KINDS = {  # row name: (--es-noise, threads that draw; 0: one a core)
    "eps drawn twice (es_grpo.py's update)": ("redrawn", 0),
    "eps drawn once, 1 thread": ("once", 1), "eps drawn once, on every core": ("once", 0),
    "the noise table (a departure)": ("table", 0)}


def real_es_noise(half, full, repeats: int) -> list[tuple]:
    """One ES update per sequence (N=16 x 16 prompts, greedy, <= 48 new tokens, bfloat16 model,
    fp32 master, members one at a time as the real model's runs decode them) for each way of making
    eps (NOISE_KINDS), against transformers' float32 generate of 64 of the prompts forced to 48
    tokens; each drawn-once row splits its seconds into noise (drawing and setting a member),
    decode, scoring, sums (A and B as members are scored) and update (the step)."""
    model, tokenizer, args, problems = half
    es_args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
    params, counter = list(model.parameters()), iter(range(10**6))
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:16]] * 16
    runs, splits = {}, {}
    for name, (noise, workers) in NOISE_KINDS.items():
        run = context(dataclasses.replace(es_args, rollout="hf", es_noise=noise), model, tokenizer)
        run.score_members.workers = workers
        runs[name] = (run, es_grpo.ESState(params, es_grpo.master_weights(params)))

    def update(name: str):
        run, state = runs[name]
        phases = [getattr(run.score_members, "seconds", None),
                  getattr(run.es_update, "seconds", None)]
        for phase in filter(None, phases):
            phase.clear()
        es_grpo.es_step(run, state, problems[:16], next(counter))
        splits[name] = {k: v for phase in filter(None, phases) for k, v in phase.items()}
    commands = {name: lambda name=name: update(name) for name in runs}
    commands["generate"] = lambda: generate_tokens(full[0], tokenizer, prompts[:64], 48,
                                                   forced=True)
    seconds = alternate(commands, repeats)
    return [(f"ES update s per sequence / transformers float32 generate s per sequence, {name} "
             "(N=16 x 16 prompts, greedy, <= 48 new tokens, bfloat16, member by member)",
             seconds[name] / len(prompts), seconds["generate"] / 64, "<= 0.6",
             ", ".join(f"{k} {v:.1f} s" for k, v in splits[name].items())
             or f"{seconds[name]:.1f} s in all")
            for name in runs]


def real_es(half, full, repeats: int) -> list[tuple]:
    """An ES iteration (bfloat16 model, fp32 master, greedy, 48 new tokens) against one batched
    generation of its sequences (N=16 x 32 prompts), and per sequence (N=16 x 16) against
    transformers' float32 generate of 64 prompts forced to 48 tokens."""
    return real_es_case(half, full, 16, 32, repeats) + real_es_case(half, full, 16, 16, repeats)


def real_es_case(half, full, members: int, count: int, repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = half
    es_args = dataclasses.replace(args, es_population=members, es_prompts=count, max_new_tokens=48)
    params, counter = list(model.parameters()), iter(range(10**6))
    state = es_grpo.ESState(params, es_grpo.master_weights(params))
    run = context(dataclasses.replace(es_args, rollout="hf", es_batched="auto"), model, tokenizer)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:count]] * members
    batch = dataclasses.replace(es_args.sampling("es", 0), batch_size=len(prompts))
    commands = {"es": lambda: es_grpo.es_step(run, state, problems[:count], next(counter)),
                "batched": lambda: run.generate(model, tokenizer, prompts, batch)}
    if count == 16:
        commands["generate"] = lambda: generate_tokens(full[0], tokenizer, prompts[:64], 48,
                                                       forced=True)
    seconds = alternate(commands, repeats)
    label = f"N={members} x {count} prompts, greedy, <= 48 new tokens, bfloat16, member by member"
    if count != 16:
        return [(f"ES iteration / one batched generation of its {len(prompts)} sequences ({label})",
                 seconds["es"], seconds["batched"], "<= 1.15",
                 "both on the HF path (scale/decode.py)")]
    return [("ES update s per sequence / transformers float32 generate s per sequence (64 prompts "
             f"forced to 48 tokens) ({label})", seconds["es"] / len(prompts),
             seconds["generate"] / 64, "<= 0.35", "")]


def bench_real_grpo(repeats: int) -> list[tuple]:
    return real_grpo(real_setup("float32"), min(repeats, 2))


def real_grpo(full, repeats: int) -> list[tuple]:
    """A GRPO step (8 prompts x 8, <= 64 new tokens, lr 1e-6) against TRL's GRPOTrainer step on the
    same model and settings: float32 both; and --rollout-dtype bfloat16 with --grpo-autocast against
    TRL with bf16=True."""
    model, tokenizer, args, problems = full
    grpo_args = dataclasses.replace(args, grpo_prompts=8, grpo_group=8, max_new_tokens=64,
                                    grpo_lr=1e-6)
    rows = []
    for low in (False, True):
        ours_args = dataclasses.replace(grpo_args, grpo_autocast=low,
                                        rollout_dtype="bfloat16" if low else "model")
        step = grpo_runner(model, tokenizer, ours_args, problems, rollout="hf")
        step()  # warm-up
        ours = statistics.median(timed(step) for _ in range(repeats))
        theirs = statistics.median(
            trl_steps(model, tokenizer, grpo_args, problems, 1 + repeats, bf16=low)[1:])
        name = "bfloat16 (rollout copy, autocast; TRL bf16=True)" if low else "float32"
        rows.append((f"GRPO step / TRL GRPOTrainer step, 8 prompts x 8, <= 64 new tokens, {name}",
                     ours, theirs, "<= 0.6", "SmolLM2-135M-Instruct, two-digit sums"))
    return rows


def real_child(kind: str):
    """Peak RSS of one configuration on the real model, in a fresh process: inference (one member's
    16 rows, bfloat16), ES member by member (N=4 x 16 prompts, bfloat16 model, fp32 master), or a
    GRPO step (8 x 8, fp32 weights and AdamW, bfloat16 rollout copy and autocast)."""
    torch.set_num_threads(2)
    model, tokenizer, args, problems = real_setup("float32" if kind == "grpo" else "bfloat16")
    args = dataclasses.replace(args, es_population=4, es_prompts=16, grpo_prompts=8, grpo_group=8,
                               max_new_tokens=48, grpo_autocast=True, rollout_dtype="bfloat16")
    # es-off, es-on: member by member, or the population decoded in one batch
    batched = kind[3:] if kind in ("es-off", "es-on") else "auto"
    run = context(dataclasses.replace(args, rollout="hf", es_batched=batched), model, tokenizer)
    params, counter = list(model.parameters()), iter(range(10**6))
    if kind == "inference":
        prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:16]]
        measured = lambda: run.generate(model, tokenizer, prompts, args.sampling("es", 0))
    elif kind in ("es-off", "es-on"):
        state = es_grpo.ESState(params, es_grpo.master_weights(params))
        measured = lambda: es_grpo.es_step(run, state, problems[:16], next(counter))
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.0)
        state = es_grpo.GRPOState(optimizer, copy.deepcopy(model).requires_grad_(False))
        measured = lambda: run.grpo_step(run, state, problems[:8], next(counter))
    for _ in range(2):
        measured()
    print(json.dumps({"rss_mb": peak_rss_mb(), "rows": 16,
                      "params_m": sum(p.numel() for p in params) / 1e6}))


def bench_real_memory(repeats: int) -> list[tuple]:
    peak = {kind: in_child(kind, "real") for kind in ("inference", "es-off", "es-on", "grpo")}
    base = peak["inference"]["rss_mb"]
    return [(f"Peak RSS, {name} / inference (SmolLM2-135M-Instruct, 16 rows, bfloat16 decoding)",
             peak[kind]["rss_mb"], base, goal, f"MB: {peak[kind]['rss_mb']:.0f} / {base:.0f}")
            for kind, name, goal in (
                ("es-off", "ES member by member (N=4 x 16, fp32 master)", "<= 1.3"),
                ("es-on", "ES population-batched (N=4 x 16, fp32 master)", "reported"),
                ("grpo", "GRPO step (8 x 8, fp32 weights and AdamW)", "reported"))]
