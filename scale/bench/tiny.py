"""The tiny model's parts: ES against one batched generation (es), where an ES iteration's time
goes (profile), GRPO against TRL's GRPOTrainer (grpo), evaluation against raw generation (eval), how
costs grow (growth), peak memory (memory), a bfloat16 engine's sampling against fp32 (precision)."""
from __future__ import annotations

import copy
import cProfile
import dataclasses
import inspect
import json
import os
import pstats
import statistics
import time

import numpy as np
import torch

import es_grpo
from scale import config, population, verifier
from scale.assembly import context
from scale.bench.harness import (alternate, es_runner, grpo_runner, in_child, peak_rss_mb, timed,
                                 tiny_setup, trl_steps)
from scale.gpu_check import CheckArgs, build


def es_rows(args, tokenizer, problems) -> list[str]:
    """The rows of one ES iteration: its prompts, once for each member."""
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]]
    return prompts * args.es_population


# ---------------------------------------------------------------- ES against one batched generation


def bench_es(repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = tiny_setup()
    prompts, tokens = es_rows(args, tokenizer, problems), {}

    def inference():
        roll = es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0))
        tokens["inference"] = roll.tokens

    batched, one_by_one = (es_runner(model, tokenizer, args, problems, mode)
                           for mode in ("on", "off"))
    medians = alternate({
        "batched": lambda: tokens.__setitem__("batched", batched()["tokens"]),
        "one_by_one": lambda: tokens.__setitem__("one_by_one", one_by_one()["tokens"]),
        "inference": inference}, repeats)
    note = (f"{len(prompts)} sequences; tokens: ES {tokens['batched']}, "
            f"inference {tokens['inference']}")
    return [("ES iteration, population-batched / one batched generation (tiny default, N=32 x 64 "
             "prompts, greedy)", medians["batched"], medians["inference"], "<= 1.25", note),
            ("ES iteration, member by member / one batched generation", medians["one_by_one"],
             medians["inference"], "", "the path for models whose N weight copies do not fit")]


# The functions whose cumulative time the profile part reports, by its rows' names. population.py
# draws its eps through its own name for noise: the same function, counted once. Few calls, each
# long: the profiler adds little to them (the verifier's many short calls it would inflate: timed
# through the run's grade hook instead).
PROFILED = {"drawing eps": (es_grpo.noise, population.noise), "update": (es_grpo.es_update,)}


def profiled_seconds(profile: cProfile.Profile) -> dict:
    """Cumulative seconds of each of PROFILED's functions that ran under profile (a call made inside
    another of them counts in both, as it runs in both). A decorated function (es_update's
    torch.no_grad) is found by its own code, not its wrapper's, which other functions share."""
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    spent = {}
    for label, functions in PROFILED.items():
        codes = [inspect.unwrap(f).__code__ for f in functions]
        keys = {(code.co_filename, code.co_firstlineno, code.co_name) for code in codes}
        if keys & stats.keys():
            spent[label] = sum(stats[key][3] for key in keys & stats.keys())
    return spent


def bench_profile(repeats: int) -> list[str]:
    """Where one population-batched ES iteration's time goes, beside plain generation of the same
    rows."""
    model, tokenizer, args, problems = tiny_setup()
    prompts = es_rows(args, tokenizer, problems)
    grading = [0.0]

    def timed_grade(problem: dict, completion: str) -> tuple[float, str]:
        tick = time.perf_counter()
        result = verifier.grade(problem, completion)  # the runs' grade hook
        grading[0] += time.perf_counter() - tick
        return result
    profiled = es_runner(model, tokenizer, args, problems, "on")
    step, rows = es_runner(model, tokenizer, args, problems, "on", grade=timed_grade), []
    for round_ in range(repeats + 1):
        profile = cProfile.Profile()
        profile.runcall(profiled)  # an iteration of its own: noise and update
        grading[0] = 0.0
        total = timed(step)  # not profiled: the whole, and the verifier through its hook
        spent = profiled_seconds(profile) | {"verifier": grading[0]}
        plain = timed(lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0)))
        if round_:
            rest = total - sum(spent.values())
            rows.append({**spent, "batched generation and stacking (the rest)": rest,
                         "whole iteration": total,
                         "plain generation of the same rows, for comparison": plain})
    return ["| one ES iteration (tiny default, batched) | seconds |", "|---|---|"] + \
        [f"| {key} | {statistics.median(row[key] for row in rows):.3f} |" for key in rows[0]]


# ---------------------------------------------------------------- GRPO against TRL's GRPOTrainer


def bench_grpo(repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = tiny_setup()
    ours, theirs = [], []
    step = grpo_runner(model, tokenizer, args, problems)
    step()  # warm-up
    for _ in range(repeats):  # alternate blocks of 3 steps; a block's first TRL step is its warm-up
        ours += [timed(step) for _ in range(3)]
        theirs += trl_steps(model, tokenizer, args, problems, 4)[1:]
    return [(f"GRPO step / TRL GRPOTrainer step ({args.grpo_prompts} prompts x {args.grpo_group}, "
             f"{args.max_new_tokens} new tokens, one update per batch, no vLLM)",
             statistics.median(ours), statistics.median(theirs), "<= 0.7",
             f"{len(ours)} and {len(theirs)} steps")]


# ---------------------------------------------------------------- evaluation against raw generation


def bench_eval(repeats: int) -> list[tuple]:
    model, tokenizer, args, _ = tiny_setup()
    _, evaluation, _ = config.evaluation_sets(args, tokenizer)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in evaluation
               for _ in range(args.eval_samples)]
    run = context(dataclasses.replace(args, rollout="plain"), model, tokenizer)
    medians = alternate({
        "eval": lambda: es_grpo.evaluate(run, evaluation),
        "raw": lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("eval", args.seed)),
    }, repeats)
    return [("Pass@K evaluation throughput / raw batched generation throughput (100 problems x 64 "
             "samples)", medians["raw"], medians["eval"], ">= 0.9",
             "ratio = raw seconds / evaluation seconds")]


# ---------------------------------------------------------------- how costs grow


def bench_growth(repeats: int) -> list[str]:
    model, tokenizer, args, problems = tiny_setup()
    populations, groups = (8, 16, 32, 64), (4, 8, 16)
    es = alternate({n: es_runner(model, tokenizer, dataclasses.replace(args, es_population=n),
                                 problems) for n in populations}, repeats)
    grpo = alternate({g: grpo_runner(model, tokenizer, dataclasses.replace(args, grpo_group=g),
                                     problems) for g in groups}, repeats)
    es_slope = np.polyfit(populations, [es[n] for n in populations], 1)[0]
    grpo_slope = np.polyfit(groups, [grpo[g] for g in groups], 1)[0]
    es_times, grpo_times = (f"{es[n]:.3f}" for n in populations), (f"{grpo[g]:.3f}" for g in groups)
    return ["| ES population N | " + " | ".join(map(str, populations))
            + " | slope (s per member) |",
            "|---|" + "---|" * (len(populations) + 1),
            "| seconds / iteration | " + " | ".join(es_times) + f" | {es_slope:.4f} |",
            "", "| GRPO group size G | " + " | ".join(map(str, groups))
            + " | slope (s per sample of each prompt) |",
            "|---|" + "---|" * (len(groups) + 1),
            "| seconds / step | " + " | ".join(grpo_times) + f" | {grpo_slope:.4f} |"]


# ---------------------------------------------------------------- peak memory, one process each


def memory_child(kind: str, size: str):
    """Run one configuration (inference, es, es-off or grpo on tiny or 60M) and print its peak
    resident set (in a fresh process, so peaks do not mix)."""
    # peak memory, not speed: where OMP_NUM_THREADS is set, torch has taken its threads from it
    # (the suite's 1, its background launches holding the other core, where a second thread only
    # slows the child); else both cores
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(2)
    model, tokenizer, args, problems = tiny_setup()
    if size == "60M":  # a 50-100M model built from a config, where the optimizer state shows
        model = build(CheckArgs(hidden=512, layers=12), torch.float32, "cpu")
        args = dataclasses.replace(args, es_population=4, es_prompts=16, grpo_prompts=8,
                                   grpo_group=4, rollout_batch=256)
    rows = args.es_population * args.es_prompts
    if kind == "inference":
        prompts = es_rows(args, tokenizer, problems)
        run = lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0))
    elif kind.startswith("es"):  # es: the automatic choice; es-off: member by member
        run = es_runner(model, tokenizer, args, problems, "off" if kind == "es-off" else "auto")
    else:
        run = grpo_runner(model, tokenizer, args, problems)
    for _ in range(2):
        run()
    print(json.dumps({"rss_mb": peak_rss_mb(), "rows": rows,
                      "params_m": sum(p.numel() for p in model.parameters()) / 1e6}))


def bench_memory() -> list[tuple]:
    peak = {}
    for size in ("tiny", "60M"):
        for kind in ("inference", "es", "es-off", "grpo"):
            peak[size, kind] = in_child(kind, size)
    rows = []
    for size in ("tiny", "60M"):
        p, es, grpo = peak[size, "inference"], peak[size, "es"], peak[size, "grpo"]
        label = f"{size} ({p['params_m']:.1f}M parameters, {p['rows']} sequences per ES iteration)"
        for kind, path in (("es", "automatic path"), ("es-off", "member by member")):
            mb = peak[size, kind]["rss_mb"]
            rows.append((f"Peak RSS, ES ({path}) / inference only, {label}", mb, p["rss_mb"],
                         "<= 1.1", f"MB: {mb:.0f} / {p['rss_mb']:.0f}"))
        rows.append((f"Peak RSS, GRPO / ES, {size}", grpo["rss_mb"], es["rss_mb"], "reported",
                     f"MB: {grpo['rss_mb']:.0f} / {es['rss_mb']:.0f}"))
    return rows


# ---------------------------------------------------------------- bfloat16 sampling against fp32


def bench_precision(samples: int = 8) -> list[str]:
    """How far a bfloat16 engine samples from the fp32 policy that GRPO trains (scale/train.py
    --vllm-dtype auto gives GRPO a bfloat16 engine): GRPO's completions (64 prompts x samples,
    temperature 1) drawn by the fp32 tiny model, then each token's log-prob under fp32 and under
    bfloat16 weights. The ratio is what importance weights would be off by; GRPO clips its ratio
    at 1 +- 0.2 (the paper preset)."""
    model, tokenizer = es_grpo.load_model("")
    half = copy.deepcopy(model).to(torch.bfloat16)
    args = config.Args()
    prompts = [es_grpo.prompt_text(p, tokenizer)
               for p in es_grpo.generate_problems("countdown", 64, seed=3)]
    with torch.no_grad():
        roll = es_grpo.rollout(model, tokenizer, [p for p in prompts for _ in range(samples)],
                               args.sampling("grpo", 0))
        full, _ = es_grpo.token_logprobs(model, roll)  # (B, T)
        low, _ = es_grpo.token_logprobs(half, roll)  # (B, T)
    log_ratio = (low.float() - full)[roll.completion_mask.bool()]  # (tokens,)
    greedy = [es_grpo.rollout(m, tokenizer, prompts, args.sampling("es", 0)).texts
              for m in (model, half)]
    outside = float(((log_ratio.exp() - 1).abs() > 0.2).float().mean())
    return ["bfloat16 against float32 weights, tiny model, GRPO's sampled tokens "
            f"({int(roll.completion_mask.sum())} tokens of {len(roll.texts)} completions):",
            f"- |log p_bf16 - log p_fp32| per token: mean {log_ratio.abs().mean():.4f}, "
            f"99th percentile {log_ratio.abs().quantile(0.99):.4f}, "
            f"max {log_ratio.abs().max():.4f}",
            "- tokens whose ratio p_bf16 / p_fp32 leaves GRPO's clip range [0.8, 1.2]: "
            f"{outside:.2%}",
            f"- greedy completions that differ: {sum(a != b for a, b in zip(*greedy))} of "
            f"{len(prompts)}"]
