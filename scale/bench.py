"""Speed and memory of es_grpo.py against their physical limits and against TRL, measured side by side.

    python -m scale.bench                 # installs trl==1.16.0 if missing; prints the markdown table
    python -m scale.bench --repeats 3     # fewer alternations
    python -m scale.bench --parts precision   # a bfloat16 engine's sampling against fp32 GRPO (seconds)
    python -m scale.bench --parts verifier    # verifier seconds per 1,000 completions; its share of a step
    python -m scale.bench --parts vllm        # the vLLM engine against es_grpo.rollout (where vLLM is installed)
    python -m scale.bench --parts real        # SmolLM2-135M-Instruct (python -m scale.real_model): real-rollout,
                                              # real-es, real-grpo, real-memory, real-vllm
    python -m scale.bench --parts tasks       # the real model on candidate task families (how its task was chosen)

Run it from the repository's root (it starts its children and any re-execution as `-m scale.bench` there).
Compared commands alternate (A, B, A, B, ...) so that drift in the machine hits both; each figure is a
median over the repeats, after one warm-up of each. Memory is the peak resident set of a separate
process per configuration. Each part prints its rows as soon as they are measured; a part that fails says
so in one line, the others still run, and the exit status is 1. Not part of the test suite (its smoke test,
tests/test_docs.py, runs one part at --repeats 1).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import es_grpo
from scale.gpu_check import CheckArgs, build
from scale import config, population, verifier
from scale.grpo import grpo_step
from scale.population import PopulationScorer
from tiny_model import tasks

ROOT = Path(__file__).resolve().parents[1]

TRL = "trl==1.16.0"


def timed(function) -> float:
    tick = time.perf_counter()
    function()
    return time.perf_counter() - tick


def alternate(commands: dict, repeats: int) -> dict:
    """Median seconds of each command, run in turn `repeats` times after one warm-up round."""
    times = {name: [] for name in commands}
    for round_ in range(repeats + 1):
        for name, command in commands.items():
            seconds = timed(command)
            if round_:
                times[name].append(seconds)
    return {name: statistics.median(t) for name, t in times.items()}


def tiny_setup(**overrides):
    model, tokenizer = es_grpo.load_model("")
    args = dataclasses.replace(config.parse_args([]), **overrides)
    problems = es_grpo.generate_problems("countdown", 512, seed=1, exclude=es_grpo.never_trained_on())
    return model.eval(), tokenizer, args, problems


def es_runner(model, tokenizer, args, problems, batched: str = "auto"):
    model = copy.deepcopy(model)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    counter = iter(range(10**6))
    run = es_grpo.Context(args, model, tokenizer, score_members=PopulationScorer(batched))
    state = es_grpo.ESState(params, master)
    return lambda: es_grpo.es_step(run, state, problems[:args.es_prompts], next(counter))


def grpo_runner(model, tokenizer, args, problems, generate=es_grpo.rollout):
    model = copy.deepcopy(model)
    reference = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.grpo_lr, weight_decay=0.0)
    counter = iter(range(10**6))

    def step():
        seed = next(counter)
        start = seed * args.grpo_prompts % (len(problems) - args.grpo_prompts)
        return grpo_step(es_grpo.Context(args, model, tokenizer, generate), es_grpo.GRPOState(optimizer, reference),
                         problems[start:start + args.grpo_prompts], seed)  # scale.train's step
    return step


# --------------------------------------------------------------------------- ES against one batched generation


def bench_es(repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = tiny_setup()
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
    tokens = {}

    def inference():
        roll = es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0))
        tokens["inference"] = roll.tokens

    batched, one_by_one = (es_runner(model, tokenizer, args, problems, mode) for mode in ("on", "off"))
    medians = alternate({"batched": lambda: tokens.__setitem__("batched", batched()["tokens"]),
                         "one_by_one": lambda: tokens.__setitem__("one_by_one", one_by_one()["tokens"]),
                         "inference": inference}, repeats)
    note = f"{len(prompts)} sequences; tokens: ES {tokens['batched']}, inference {tokens['inference']}"
    return [("ES iteration, population-batched / one batched generation (tiny default, N=32 x 64 prompts, greedy)",
             medians["batched"], medians["inference"], "<= 1.25", note),
            ("ES iteration, member by member / one batched generation", medians["one_by_one"], medians["inference"],
             "", "the path for models whose N weight copies do not fit")]


def bench_profile(repeats: int) -> list[str]:
    """Where one population-batched ES iteration's time goes, beside plain generation of the same rows."""
    model, tokenizer, args, problems = tiny_setup()
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
    parts, spent = {"noise": "drawing eps", "score": "verifier", "es_update": "update"}, {}
    modules = (es_grpo, population)  # population.py draws its eps through its own name for noise
    originals = {(module, name): getattr(module, name) for module in modules for name in parts
                 if hasattr(module, name)}

    def timing(label, function):
        def wrapped(*a, **k):
            tick = time.perf_counter()
            result = function(*a, **k)
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - tick
            return result
        return wrapped

    step, rows = es_runner(model, tokenizer, args, problems, "on"), []
    try:
        for (module, name), function in originals.items():
            setattr(module, name, timing(parts[name], function))
        for round_ in range(repeats + 1):
            spent.clear()
            total = timed(step)
            plain = timed(lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0)))
            if round_:
                rows.append({**spent, "batched generation and stacking (the rest)": total - sum(spent.values()),
                             "whole iteration": total, "plain generation of the same rows, for comparison": plain})
    finally:
        for (module, name), function in originals.items():
            setattr(module, name, function)
    return ["| one ES iteration (tiny default, batched) | seconds |", "|---|---|"] + \
        [f"| {key} | {statistics.median(row[key] for row in rows):.3f} |" for key in rows[0]]


# --------------------------------------------------------------------------- GRPO against TRL's GRPOTrainer


def trl_steps(model, tokenizer, args, problems, steps: int, bf16: bool = False) -> list[float]:
    """Seconds of each of `steps` GRPOTrainer steps at es_grpo's settings: same model, prompts, group, tokens."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": es_grpo.prompt_text(p, tokenizer), "problem": json.dumps(p)}
            for p in problems[:steps * args.grpo_prompts]]

    def countdown(completions, problem, **_):  # es_grpo's reward, whatever the task
        return [es_grpo.grade(json.loads(p), c)[0] for c, p in zip(completions, problem)]

    class StepTimer(TrainerCallback):
        times: list = []

        def on_step_begin(self, *_, **__):
            self.tick = time.perf_counter()

        def on_step_end(self, *_, **__):
            self.times.append(time.perf_counter() - self.tick)

    timer = StepTimer()
    timer.times = []
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(output_dir=out, per_device_train_batch_size=args.grpo_prompts * args.grpo_group,
                            num_generations=args.grpo_group, max_completion_length=args.max_new_tokens,
                            learning_rate=args.grpo_lr, beta=args.grpo_beta, epsilon=args.grpo_clip,
                            temperature=args.grpo_temperature, num_iterations=1, steps_per_generation=1,
                            loss_type="dapo", scale_rewards="group", weight_decay=0.0, max_steps=steps,
                            lr_scheduler_type="constant", warmup_steps=0, logging_steps=10**6, save_strategy="no",
                            report_to=[], use_cpu=True, bf16=bf16, shuffle_dataset=False, seed=0,
                            disable_dropout=True, dataloader_num_workers=0, gradient_checkpointing=False)
        trainer = GRPOTrainer(model=copy.deepcopy(model), reward_funcs=countdown, args=config,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer, callbacks=[timer])
        trainer.train()
    return timer.times


def bench_grpo(repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = tiny_setup()
    ours, theirs = [], []
    step = grpo_runner(model, tokenizer, args, problems)
    step()  # warm-up
    for _ in range(repeats):  # alternate blocks of 3 steps; the first TRL step of a block is its warm-up
        ours += [timed(step) for _ in range(3)]
        theirs += trl_steps(model, tokenizer, args, problems, 4)[1:]
    return [(f"GRPO step / TRL GRPOTrainer step ({args.grpo_prompts} prompts x {args.grpo_group}, "
             f"{args.max_new_tokens} new tokens, one update per batch, no vLLM)",
             statistics.median(ours), statistics.median(theirs), "<= 0.7", f"{len(ours)} and {len(theirs)} steps")]


# --------------------------------------------------------------------------- evaluation against raw generation


def bench_eval(repeats: int) -> list[tuple]:
    model, tokenizer, args, _ = tiny_setup()
    _, evaluation, _ = config.evaluation_sets(args, tokenizer)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in evaluation for _ in range(args.eval_samples)]
    medians = alternate({
        "eval": lambda: es_grpo.evaluate(es_grpo.Context(args, model, tokenizer), evaluation),
        "raw": lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("eval", args.seed))}, repeats)
    return [("Pass@K evaluation throughput / raw batched generation throughput (100 problems x 64 samples)",
             medians["raw"], medians["eval"], ">= 0.9", "ratio = raw seconds / evaluation seconds")]


# --------------------------------------------------------------------------- how costs grow


def bench_growth(repeats: int) -> list[str]:
    model, tokenizer, args, problems = tiny_setup()
    populations, groups = (8, 16, 32, 64), (4, 8, 16)
    es = alternate({n: es_runner(model, tokenizer, dataclasses.replace(args, es_population=n), problems)
                    for n in populations}, repeats)
    grpo = alternate({g: grpo_runner(model, tokenizer, dataclasses.replace(args, grpo_group=g), problems)
                      for g in groups}, repeats)
    es_slope, grpo_slope = np.polyfit(populations, [es[n] for n in populations], 1)[0], \
        np.polyfit(groups, [grpo[g] for g in groups], 1)[0]
    lines = ["| ES population N | " + " | ".join(map(str, populations)) + " | slope (s per member) |",
             "|---|" + "---|" * (len(populations) + 1),
             "| seconds / iteration | " + " | ".join(f"{es[n]:.3f}" for n in populations) + f" | {es_slope:.4f} |",
             "", "| GRPO group size G | " + " | ".join(map(str, groups)) + " | slope (s per sample of each prompt) |",
             "|---|" + "---|" * (len(groups) + 1),
             "| seconds / step | " + " | ".join(f"{grpo[g]:.3f}" for g in groups) + f" | {grpo_slope:.4f} |"]
    return lines


# --------------------------------------------------------------------------- peak memory, one process each


def child(kind: str, size: str, repeats: str = "1"):
    """Run one configuration and print its peak resident set (in a fresh process, so peaks do not mix); or
    ("part", NAME, REPEATS) one part's rows, as JSON."""
    if kind == "part":
        torch.set_num_threads(2)
        return print(json.dumps((COMPARISONS.get(size) or TABLES[size])(int(repeats))))
    if kind in ("hf-generate", "vllm-generate", "hf-es", "vllm-es") and size in ("tiny", "52M"):
        return vllm_child(kind, size, int(repeats))
    if kind in ("hf-generate", "vllm-generate", "hf-es", "vllm-es") and size in ("real-float32", "real-bfloat16"):
        return real_engine_child(kind, size.split("-")[1], int(repeats))
    if size == "real" and kind in ("inference", "es-off", "es-on", "grpo"):
        return real_child(kind)
    if kind not in ("inference", "es", "es-off", "grpo") or size not in ("tiny", "60M"):
        raise SystemExit(f"--child: no configuration {kind} {size}")
    # peak memory, not speed: where OMP_NUM_THREADS is set, torch has taken its threads from it (the suite's 1,
    # its background launches holding the other core, where a second thread only slows the child); else both cores
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(2)
    model, tokenizer, args, problems = tiny_setup()
    if size == "60M":  # a 50-100M model built from a config, where the optimizer state shows
        model = build(CheckArgs(hidden=512, layers=12), torch.float32, "cpu")
        args = dataclasses.replace(args, es_population=4, es_prompts=16, grpo_prompts=8, grpo_group=4,
                                   rollout_batch=256)
    rows = args.es_population * args.es_prompts
    if kind == "inference":
        prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
        run = lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0))
    elif kind.startswith("es"):  # es: the automatic choice; es-off: member by member
        run = es_runner(model, tokenizer, args, problems, "off" if kind == "es-off" else "auto")
    else:
        run = grpo_runner(model, tokenizer, args, problems)
    for _ in range(2):
        run()
    print(json.dumps({"rss_mb": peak_rss_mb(), "rows": rows,
                      "params_m": sum(p.numel() for p in model.parameters()) / 1e6}))


def in_child(*argv: str) -> dict:
    """`python -m scale.bench --child ARGV` in a fresh process, from the repository's root: its last line, as
    JSON. A child that fails raises with the end of what it printed."""
    done = subprocess.run([sys.executable, "-m", "scale.bench", "--child", *argv], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"child {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:  # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024


def bench_memory() -> list[tuple]:
    peak = {}
    for size in ("tiny", "60M"):
        for kind in ("inference", "es", "es-off", "grpo"):
            peak[size, kind] = in_child(kind, size)
    rows = []
    for size in ("tiny", "60M"):
        p = peak[size, "inference"]
        label = f"{size} ({p['params_m']:.1f}M parameters, {p['rows']} sequences per ES iteration)"
        for kind, path in (("es", "automatic path"), ("es-off", "member by member")):
            rows.append((f"Peak RSS, ES ({path}) / inference only, {label}", peak[size, kind]["rss_mb"], p["rss_mb"],
                         "<= 1.1", f"MB: {peak[size, kind]['rss_mb']:.0f} / {p['rss_mb']:.0f}"))
        rows.append((f"Peak RSS, GRPO / ES, {size}", peak[size, "grpo"]["rss_mb"], peak[size, "es"]["rss_mb"],
                     "reported", f"MB: {peak[size, 'grpo']['rss_mb']:.0f} / {peak[size, 'es']['rss_mb']:.0f}"))
    return rows


def bench_precision(samples: int = 8) -> list[str]:
    """How far a bfloat16 engine samples from the fp32 policy that GRPO trains (scale/train.py --vllm-dtype auto
    gives GRPO a bfloat16 engine): GRPO's completions (64 prompts x samples, temperature 1) drawn by the fp32 tiny
    model, then each token's log-prob under fp32 and under bfloat16 weights. The ratio is what importance weights
    would be off by; GRPO clips its ratio at 1 +- 0.2 (the paper preset)."""
    model, tokenizer = es_grpo.load_model("")
    half = copy.deepcopy(model).to(torch.bfloat16)
    args = config.Args()
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in es_grpo.generate_problems("countdown", 64, seed=3)]
    with torch.no_grad():
        roll = es_grpo.rollout(model, tokenizer, [p for p in prompts for _ in range(samples)],
                               args.sampling("grpo", 0))
        full, _ = es_grpo.token_logprobs(model, roll)  # (B, T)
        low, _ = es_grpo.token_logprobs(half, roll)  # (B, T)
    log_ratio = (low.float() - full)[roll.completion_mask.bool()]  # (tokens,)
    greedy = [es_grpo.rollout(m, tokenizer, prompts, args.sampling("es", 0)).texts for m in (model, half)]
    return ["bfloat16 against float32 weights, tiny model, GRPO's sampled tokens "
            f"({int(roll.completion_mask.sum())} tokens of {len(roll.texts)} completions):",
            f"- |log p_bf16 - log p_fp32| per token: mean {log_ratio.abs().mean():.4f}, 99th percentile "
            f"{log_ratio.abs().quantile(0.99):.4f}, max {log_ratio.abs().max():.4f}",
            f"- tokens whose ratio p_bf16 / p_fp32 leaves GRPO's clip range [0.8, 1.2]: "
            f"{float(((log_ratio.exp() - 1).abs() > 0.2).float().mean()):.2%}",
            f"- greedy completions that differ: {sum(a != b for a, b in zip(*greedy))} of {len(prompts)}"]


# --------------------------------------------------------------------------- the verifier's cost


def verifier_corpus(count: int) -> dict[str, list[tuple]]:
    """count (problem, completion) pairs of each kind, half right: Countdown, GSM8K-style (plain and boxed
    numbers against "#### N") and MATH-style (LaTeX against MATH answers, read by math-verify)."""
    countdown = es_grpo.generate_problems("countdown", count, seed=3)
    math_answers = [("\\frac{3}{4}", "0.75", "\\frac{4}{3}"), ("(3,2)", "(3, 2)", "(2,3)"),
                    ("[-2,7)", "[-2, 7)", "[-2,7]"), ("5\\sqrt{3}", "5\\sqrt3", "3\\sqrt{5}"),
                    ("\\text{(C)}", "\\text{(C)}", "\\text{(B)}")]
    corpus = {"Countdown": [], "GSM8K-style": [], "MATH-style": []}
    for i in range(count):
        problem, right = countdown[i], i % 2 == 0
        corpus["Countdown"].append((problem, f"<answer>{problem['solution'] if right else '1+2'}</answer>"))
        value = 100 + i
        text = (f"She pays {value // 2} + {value - value // 2} = {value} dollars." if i % 4 < 2 else
                f"So the total is $\\boxed{{{value:,}}}$.")
        corpus["GSM8K-style"].append(({"task": "math", "answer": f"... #### {value if right else value + 1}"}, text))
        reference, good, bad = math_answers[i % len(math_answers)]
        corpus["MATH-style"].append(({"task": "math", "answer": reference},
                                     f"Hence the answer is $\\boxed{{{good if right else bad}}}$ (step {i})."))
    return corpus


def bench_verifier(repeats: int) -> list[str]:
    """Verifier seconds per 1,000 completions of each kind, and its share of a GRPO step and an ES iteration."""
    verifier.install()  # as scale.train and eval.py score: math-verify in a worker process
    verifier.MATH_VERIFY.compare("1", "$1$")  # a started worker: its start is once a process
    lines = ["| verifier, per 1,000 completions | seconds |", "|---|---|"]
    for kind, pairs in verifier_corpus(1000).items():
        grade_all = lambda pairs=pairs: [es_grpo.grade(p, c) for p, c in pairs]  # noqa: E731
        seconds = statistics.median(timed(grade_all) for _ in range(repeats))
        lines.append(f"| {kind} | {seconds:.3f} |")
    model, tokenizer, args, problems = tiny_setup()
    spent, original = [0.0], es_grpo.score

    def timed_score(*a):
        tick = time.perf_counter()
        result = original(*a)
        spent[0] += time.perf_counter() - tick
        return result
    lines += ["", "| the verifier's share (tiny default, Countdown) | verifier s | step s | share |",
              "|---|---|---|---|"]
    es_grpo.score = timed_score
    try:
        for name, step in (("GRPO step", grpo_runner(model, tokenizer, args, problems)),
                           ("ES iteration", es_runner(model, tokenizer, args, problems))):
            step()  # warm-up
            shares = []
            for _ in range(repeats):
                spent[0] = 0.0
                total = timed(step)
                shares.append((spent[0], total))
            grading, total = (statistics.median(x) for x in zip(*shares))
            lines.append(f"| {name} | {grading:.4f} | {total:.3f} | {grading / total:.1%} |")
    finally:
        es_grpo.score = original
    return lines


# --------------------------------------------------------------------------- the vLLM engine against es_grpo.rollout


def vllm_setup(size: str):
    """The tiny model, or the 52M-parameter model built from a config (random weights: every completion runs
    to max_new_tokens), saved where an engine can load it; tiny's tokenizer, its default settings, and the
    prompts of one ES iteration (64 prompts x 32 members, greedy)."""
    model, tokenizer, args, problems = tiny_setup()
    if size == "52M":
        model = build(CheckArgs(hidden=512, layers=12), torch.float32, "cpu")
    folder = tempfile.mkdtemp(prefix="bench_vllm_")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
    return model, tokenizer, args, problems, folder, prompts


def vllm_child(kind: str, size: str, repeats: int):
    """One of hf-generate, vllm-generate, hf-es, vllm-es on `size`: median seconds and tokens of `repeats`
    runs after a warm-up, and the process's peak RSS (the engine's KV cache included: VLLM_CPU_KVCACHE_SPACE)."""
    torch.set_num_threads(2)
    model, tokenizer, args, problems, folder, prompts = vllm_setup(size)
    generate = launched_engine(folder, "float32", 64) if kind.startswith("vllm") else es_grpo.rollout
    measure_child(kind, (model, tokenizer, args, problems), generate, prompts, args.sampling("es", 0), repeats)


def real_engine_child(kind: str, dtype: str, repeats: int):
    """On the real model in `dtype`, the HF path (scale/decode.py) or vLLM's engine: 64 prompts, greedy, <= 64 new
    tokens (hf-generate, vllm-generate), or one ES update of N=16 x 16 prompts, greedy, <= 48 new tokens (hf-es:
    the automatic path; vllm-es: members inside the engine)."""
    from scale.decode import FastRollout
    torch.set_num_threads(2)
    model, tokenizer, args, problems = real_setup(dtype)
    args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:64]]
    generate = launched_engine(REAL_FOLDER, dtype, 256) if kind.startswith("vllm") else FastRollout()
    measure_child(kind, (model, tokenizer, args, problems), generate, prompts, es_grpo.Sampling(max_new_tokens=64),
                  repeats)


def launched_engine(folder: str, dtype: str, max_seqs: int):
    """vLLM's engine on folder, started (its CPU build: a KV cache of VLLM_CPU_KVCACHE_SPACE GiB, 1 unless set)."""
    from scale.vllm_rollout import EngineSettings, VLLMRollout
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    engine = VLLMRollout.launch(EngineSettings(folder, dtype, 0.5, max_seqs, 8192, 256, 0, 600))
    engine.start()
    return engine


def measure_child(kind: str, setup: tuple, generate, prompts: list[str], sampling, repeats: int):
    """Print median seconds and tokens of `repeats` runs after a warm-up, and peak RSS: a generation of prompts
    (kind ...-generate) or an ES update of args.es_population x args.es_prompts (...-es; vllm-es: members inside
    the engine, else the automatic path)."""
    model, tokenizer, args, problems = setup
    in_engine = kind.startswith("vllm")
    if kind.endswith("generate"):
        def run():
            return generate(model, tokenizer, prompts, sampling).tokens
    else:
        params, counter = list(model.parameters()), iter(range(10**6))
        state = es_grpo.ESState(generate.es_weights(model) if in_engine else params, es_grpo.master_weights(params))
        scorer = es_grpo.score_members if in_engine else PopulationScorer("auto")
        context = es_grpo.Context(args, model, tokenizer, generate, score_members=scorer)

        def run():
            return es_grpo.es_step(context, state, problems[:args.es_prompts], next(counter))["tokens"]
    tokens = [run()]  # the warm-up
    seconds = [timed(lambda: tokens.append(run())) for _ in range(repeats)]
    print(json.dumps({"seconds": statistics.median(seconds), "tokens": tokens[-1], "rss_mb": peak_rss_mb(),
                      "params_m": sum(p.numel() for p in model.parameters()) / 1e6}))
    if in_engine:
        generate.shutdown()


def bench_real_engine(repeats: int) -> list[tuple]:
    """vLLM's CPU engine against the HF path on the real model, float32 and bfloat16, each in its own process."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None:
        return [("vLLM engine on the real model", float("nan"), 1.0, "", "not measured: vLLM is not installed")]
    rows = []
    for dtype in ("float32", "bfloat16"):
        hf, engine = (in_child(kind, f"real-{dtype}", str(min(repeats, 2)))
                      for kind in ("hf-generate", "vllm-generate"))
        rows.append((f"rollout tokens/s, HF path / vLLM CPU engine, {dtype} (SmolLM2-135M-Instruct, 64 prompts, "
                     "greedy, <= 64 new)", hf["tokens"] / hf["seconds"], engine["tokens"] / engine["seconds"],
                     ">= 0.5", f"peak RSS MB: {hf['rss_mb']:.0f} / {engine['rss_mb']:.0f}"))
    hf, engine = (in_child(kind, "real-bfloat16", "1") for kind in ("hf-es", "vllm-es"))
    rows.append(("ES update s, HF path / members inside the vLLM CPU engine, bfloat16 (N=16 x 16 prompts, greedy, "
                 "<= 48 new)", hf["seconds"], engine["seconds"], "reported",
                 f"peak RSS MB: {hf['rss_mb']:.0f} / {engine['rss_mb']:.0f}"))
    return rows


def bench_vllm(repeats: int) -> list[tuple]:
    """vLLM's engine (its CPU build here: float32, enforce_eager, VLLM_CPU_KVCACHE_SPACE=1) against
    es_grpo.rollout on the same 2,048 greedy rows; one ES iteration inside the engine (a reload per member)
    against the transformers path (population-batched where it fits); each in its own process."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None:
        raise RuntimeError("vLLM is not installed (scale/README.md, Install)")
    rows = []
    for size in ("tiny", "52M"):
        measured = {kind: in_child(kind, size, str(repeats))
                    for kind in ("hf-generate", "vllm-generate", "hf-es", "vllm-es")}
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


# --------------------------------------------------------------------------- a real model: SmolLM2-135M-Instruct

REAL_FOLDER = os.environ.get("ES_GRPO_REAL_MODEL", str(ROOT / "models" / "SmolLM2-135M-Instruct"))


def real_setup(dtype: str = "float32"):
    """SmolLM2-135M-Instruct (`python -m scale.real_model`) on its task, two-digit sums: model, tokenizer, scale's
    flags for it, and 512 training problems."""
    if not (Path(REAL_FOLDER) / "config.json").is_file():
        raise RuntimeError(f"no model folder at {REAL_FOLDER}: python -m scale.real_model (docs/real-model.md)")
    model, tokenizer = es_grpo.load_model(REAL_FOLDER, "cpu", dtype)
    args = config.parse_args(["--model", REAL_FOLDER, "--task", "add", "--rollout-batch", "512"])
    problems = es_grpo.generate_problems("add", 512, seed=11, exclude=es_grpo.never_trained_on())
    return model.eval(), tokenizer, args, problems


def ceiling(model, rows: int) -> dict:
    """This CPU's own limit for a decode step of `rows` rows: one pass over every Linear of the model (its weights
    read from memory, as a step reads them; plain and oneDNN-prepacked kernels, the faster) and a read of every
    weight (memory bandwidth). Attention, norms and sampling are left out: an upper bound."""
    from scale.decode import PackedLinears, cpu_has_bfloat16, packed_linear
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    dtype = linears[0].weight.dtype
    inputs = {n: torch.randn(rows, n, dtype=dtype) for n in {layer.in_features for layer in linears}}
    packs = PackedLinears()
    kernels = {"plain": lambda: [torch.nn.functional.linear(inputs[m.in_features], m.weight) for m in linears]}
    if dtype != torch.float32 and cpu_has_bfloat16():
        packed = [(packs.pack(m, rows), m) for m in linears]
        kernels["packed"] = lambda: [packed_linear(p, None, inputs[m.in_features]) for p, m in packed]
    with torch.no_grad():
        seconds = min(statistics.median(timed(kernel) for _ in range(5)) for kernel in kernels.values())
        weights = [p for p in model.parameters()]
        read = statistics.median(timed(lambda: [p.sum() for p in weights]) for _ in range(5))
    flops, size = 2 * rows * sum(m.weight.numel() for m in linears), sum(p.numel() * p.element_size() for p in weights)
    return {"tokens_per_s": rows / seconds, "gflops": flops / seconds / 1e9, "gb_per_s": size / read / 1e9,
            "bandwidth_tokens_per_s": rows / read}  # rows a step, a step reading every weight once


def generate_tokens(model, tokenizer, prompts: list[str], new_tokens: int, forced: bool = False) -> int:
    """transformers' own model.generate, greedy (forced: every row to new_tokens); the tokens it generated, each
    row up to and including its first end-of-turn id."""
    encoded = tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**encoded, max_new_tokens=new_tokens, min_new_tokens=new_tokens if forced else 0,
                             do_sample=False, eos_token_id=es_grpo.eos_ids(model, tokenizer))
    new = out[:, encoded["input_ids"].shape[1]:]  # (B, T)
    ended = torch.isin(new, torch.tensor(es_grpo.eos_ids(model, tokenizer)))
    after = (ended.cumsum(1) - ended.long()) > 0  # positions past the first end
    return new.numel() if forced else int((~after).sum())


def bench_real_rollout(repeats: int) -> list[tuple]:
    """Rollout tokens/s on SmolLM2-135M-Instruct, float32 and bfloat16: es_grpo.rollout, the HF path
    (scale/decode.py) and transformers' generate, against es_grpo.rollout at float32 and this CPU's ceiling."""
    from scale.decode import FastRollout
    repeats, rows, new_tokens = min(repeats, 2), [], 64
    models = {dtype: real_setup(dtype) for dtype in ("float32", "bfloat16")}
    _, tokenizer, _, problems = models["float32"]
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:64]]
    greedy = es_grpo.Sampling(max_new_tokens=new_tokens, batch_size=512)
    tokens, decoders = {}, {}
    for dtype, (model, *_) in models.items():
        decoders[f"es_grpo.rollout {dtype}"] = lambda m=model: es_grpo.rollout(m, tokenizer, prompts, greedy).tokens
        decoders[f"HF path (scale/decode.py) {dtype}"] = lambda m=model: FastRollout()(m, tokenizer, prompts,
                                                                                         greedy).tokens
        decoders[f"transformers generate {dtype}"] = lambda m=model: generate_tokens(m, tokenizer, prompts, new_tokens)
    seconds = alternate({name: lambda name=name, f=f: tokens.__setitem__(name, f()) for name, f in decoders.items()},
                        repeats)
    rate = {name: tokens[name] / seconds[name] for name in decoders}
    limits = {dtype: ceiling(model, len(prompts)) for dtype, (model, *_) in models.items()}
    for name in decoders:
        dtype = name.rsplit(" ", 1)[1]
        rows.append((f"rollout tokens/s, {name} / es_grpo.rollout float32 (64 prompts, greedy, <= {new_tokens} new)",
                     rate[name], rate["es_grpo.rollout float32"], ">= 5 (HF path bfloat16)" if "HF" in name else "",
                     f"{rate[name] / limits[dtype]['tokens_per_s']:.1%} of the {dtype} matmul ceiling "
                     f"({limits[dtype]['tokens_per_s']:.0f} tokens/s, {limits[dtype]['gflops']:.0f} GFLOP/s); "
                     f"memory-bound ceiling {limits[dtype]['bandwidth_tokens_per_s']:.0f} tokens/s at "
                     f"{limits[dtype]['gb_per_s']:.1f} GB/s"))
    return rows


def bench_real_es(repeats: int) -> list[tuple]:
    return real_es(real_setup("bfloat16"), real_setup("float32"), min(repeats, 2))


def bench_real_grpo(repeats: int) -> list[tuple]:
    return real_grpo(real_setup("float32"), min(repeats, 2))


def real_es(half, full, repeats: int) -> list[tuple]:
    """An ES iteration (bfloat16 model, fp32 master, greedy, 48 new tokens) against one batched generation of its
    sequences (N=16 x 32 prompts), and per sequence (N=16 x 16) against transformers' float32 generate of 64
    prompts forced to 48 tokens."""
    return real_es_case(half, full, 16, 32, repeats) + real_es_case(half, full, 16, 16, repeats)


def real_es_case(half, full, members: int, count: int, repeats: int) -> list[tuple]:
    from scale.decode import FastRollout
    model, tokenizer, args, problems = half
    es_args = dataclasses.replace(args, es_population=members, es_prompts=count, max_new_tokens=48)
    fast, params, counter = FastRollout(), list(model.parameters()), iter(range(10**6))
    state = es_grpo.ESState(params, es_grpo.master_weights(params))
    run = es_grpo.Context(es_args, model, tokenizer, fast, score_members=PopulationScorer("auto"))
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:count]] * members
    batch = dataclasses.replace(es_args.sampling("es", 0), batch_size=len(prompts))
    commands = {"es": lambda: es_grpo.es_step(run, state, problems[:count], next(counter)),
                "batched": lambda: fast(model, tokenizer, prompts, batch)}
    if count == 16:
        commands["generate"] = lambda: generate_tokens(full[0], tokenizer, prompts[:64], 48, forced=True)
    seconds = alternate(commands, repeats)
    label = f"N={members} x {count} prompts, greedy, <= 48 new tokens, bfloat16, member by member"
    if count != 16:
        return [(f"ES iteration / one batched generation of its {len(prompts)} sequences ({label})",
                 seconds["es"], seconds["batched"], "<= 1.15", "both on the HF path (scale/decode.py)")]
    return [(f"ES update s per sequence / transformers float32 generate s per sequence (64 prompts forced to 48 "
             f"tokens) ({label})", seconds["es"] / len(prompts), seconds["generate"] / 64, "<= 0.35", "")]


def sum_or_product(a: int, op: str, b: int) -> dict:
    return {"task": "add", "question": f"{a}{op}{b}", "answer": str(a + b if op == "+" else a * b)}


def two_step_word_problem(rng) -> dict:
    name, item = rng.choice(tasks.NAMES), rng.choice(tasks.ITEMS)
    a, b, c = rng.randint(10, 60), rng.randint(2, 9), rng.randint(2, 9)
    question = (f"{name} has {a} {item}, gets {b} more, then gives away {c}. "
                f"How many {item} does {name} have now?")
    return {"task": "math", "question": question, "answer": f"#### {a + b - c}"}


TASK_CANDIDATES = {  # generated families measured against the built-in ones when the real model's task was chosen
    "one-digit sums": lambda rng: sum_or_product(rng.randint(2, 9), "+", rng.randint(2, 9)),
    "two-digit + one-digit sums": lambda rng: sum_or_product(rng.randint(10, 99), "+", rng.randint(2, 9)),
    "three-digit sums": lambda rng: sum_or_product(rng.randint(100, 999), "+", rng.randint(100, 999)),
    "one-digit products": lambda rng: sum_or_product(rng.randint(2, 9), "*", rng.randint(2, 9)),
    "two-digit x one-digit products": lambda rng: sum_or_product(rng.randint(10, 99), "*", rng.randint(2, 9)),
    "two-step word problems": two_step_word_problem}


def bench_tasks(repeats: int) -> list[str]:
    """SmolLM2-135M-Instruct on each candidate task family, as its task was chosen (docs/real-model.md): Pass@1
    of 2 samples on each of 100 problems at the evaluation temperature (0.6), up to 256 new tokens, the project's
    grader and chat prompts, decoded in bfloat16; the share of answers in the right format and their lengths."""
    import random

    from scale.decode import FastRollout
    model, tokenizer, args, _ = real_setup("bfloat16")
    families = {name: [make(random.Random(f"{name}-{i}")) for i in range(100)]
                for name, make in TASK_CANDIDATES.items()}
    families |= {f"built-in {task}": es_grpo.evaluation_pool(task, "dev")[:100]
                 for task in ("add", "word", "sort", "countdown")}
    lines = ["| family (100 problems x 2 samples, T=0.6) | pass@1 | final answer | mean tokens | 95th pct |",
             "|---|---|---|---|---|"]
    for name, problems in families.items():
        rows = [p for p in problems for _ in range(2)]
        roll = FastRollout()(model, tokenizer, [es_grpo.prompt_text(p, tokenizer) for p in rows],
                             es_grpo.Sampling(0.6, 1.0, 256, 0, 256))
        rewards, lengths = es_grpo.score(rows, roll.texts), roll.completion_mask.sum(1).float()
        right, answered = float((rewards == 1).float().mean()), float((rewards > 0).float().mean())
        lines.append(f"| {name} | {right:.3f} | {answered:.2f} | {float(lengths.mean()):.0f} | "
                     f"{float(lengths.quantile(0.95)):.0f} |")
        print(lines[-1], flush=True)
    return lines


def real_child(kind: str):
    """Peak RSS of one configuration on the real model, in a fresh process: inference (one member's 16 rows,
    bfloat16), ES member by member (N=4 x 16 prompts, bfloat16 model, fp32 master), or a GRPO step (8 x 8, fp32
    weights and AdamW, bfloat16 rollout copy and autocast)."""
    from scale.decode import FastRollout
    torch.set_num_threads(2)
    model, tokenizer, args, problems = real_setup("float32" if kind == "grpo" else "bfloat16")
    args = dataclasses.replace(args, es_population=4, es_prompts=16, grpo_prompts=8, grpo_group=8,
                               max_new_tokens=48, grpo_autocast=True)
    fast, params, counter = FastRollout("bfloat16"), list(model.parameters()), iter(range(10**6))
    if kind == "inference":
        prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:16]]
        run = lambda: fast(model, tokenizer, prompts, args.sampling("es", 0))
    elif kind in ("es-off", "es-on"):  # member by member, or the population decoded in one batch
        state = es_grpo.ESState(params, es_grpo.master_weights(params))
        context = es_grpo.Context(args, model, tokenizer, fast, score_members=PopulationScorer(kind[3:]))
        run = lambda: es_grpo.es_step(context, state, problems[:16], next(counter))
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.0)
        state = es_grpo.GRPOState(optimizer, copy.deepcopy(model).requires_grad_(False))
        run = lambda: grpo_step(es_grpo.Context(args, model, tokenizer, fast), state, problems[:8], next(counter))
    for _ in range(2):
        run()
    print(json.dumps({"rss_mb": peak_rss_mb(), "rows": 16, "params_m": sum(p.numel() for p in params) / 1e6}))


def bench_real_memory(repeats: int) -> list[tuple]:
    peak = {kind: in_child(kind, "real") for kind in ("inference", "es-off", "es-on", "grpo")}
    base = peak["inference"]["rss_mb"]
    return [(f"Peak RSS, {name} / inference (SmolLM2-135M-Instruct, 16 rows, bfloat16 decoding)",
             peak[kind]["rss_mb"], base, goal, f"MB: {peak[kind]['rss_mb']:.0f} / {base:.0f}")
            for kind, name, goal in (("es-off", "ES member by member (N=4 x 16, fp32 master)", "<= 1.3"),
                                     ("es-on", "ES population-batched (N=4 x 16, fp32 master)", "reported"),
                                     ("grpo", "GRPO step (8 x 8, fp32 weights and AdamW)", "reported"))]


def real_grpo(full, repeats: int) -> list[tuple]:
    """A GRPO step (8 prompts x 8, <= 64 new tokens, lr 1e-6) against TRL's GRPOTrainer step on the same model
    and settings: float32 both; and --rollout-dtype bfloat16 with --grpo-autocast against TRL with bf16=True."""
    from scale.decode import FastRollout
    model, tokenizer, args, problems = full
    grpo_args = dataclasses.replace(args, grpo_prompts=8, grpo_group=8, max_new_tokens=64, grpo_lr=1e-6)
    rows = []
    for low in (False, True):
        step = grpo_runner(model, tokenizer, dataclasses.replace(grpo_args, grpo_autocast=low), problems,
                           generate=FastRollout("bfloat16" if low else "model"))
        step()  # warm-up
        ours = statistics.median(timed(step) for _ in range(repeats))
        theirs = statistics.median(trl_steps(model, tokenizer, grpo_args, problems, 1 + repeats, bf16=low)[1:])
        name = "bfloat16 (rollout copy, autocast; TRL bf16=True)" if low else "float32"
        rows.append((f"GRPO step / TRL GRPOTrainer step, 8 prompts x 8, <= 64 new tokens, {name}", ours, theirs,
                     "<= 0.6", "SmolLM2-135M-Instruct, two-digit sums"))
    return rows


REAL = ("real-rollout", "real-es", "real-grpo", "real-memory", "real-vllm")  # --parts real: all of them
PARTS = ("es", "grpo", "eval", "memory", "growth", "profile", "precision", "verifier", "vllm", *REAL, "tasks")
COMPARISONS = {"es": bench_es, "grpo": bench_grpo, "eval": bench_eval, "memory": lambda repeats: bench_memory(),
               "vllm": bench_vllm, "real-rollout": bench_real_rollout, "real-es": bench_real_es,
               "real-grpo": bench_real_grpo, "real-memory": bench_real_memory,
               "real-vllm": bench_real_engine}  # rows of the comparison table
TABLES = {"growth": bench_growth, "profile": bench_profile, "precision": lambda repeats: bench_precision(),
          "verifier": bench_verifier, "tasks": bench_tasks}  # lines of their own


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m scale.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="alternations of each comparison")
    parser.add_argument("--parts", default=",".join(p for p in PARTS if p not in ("vllm", *REAL, "tasks")),
                        help=f"which comparisons to run, comma-separated: {', '.join(PARTS)} (default: all but vllm, "
                             "real and tasks, which need their own installs)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    flags = parser.parse_args(argv)
    if flags.child:
        return child(*flags.child)
    parts = [part for name in flags.parts.split(",") for part in (REAL if name == "real" else [name])]
    unknown = set(parts) - set(PARTS)
    if unknown or flags.repeats < 1:
        parser.error(f"--parts: the parts are {', '.join(PARTS)}; --repeats at least 1"
                     + (f" (not {', '.join(sorted(unknown))})" if unknown else ""))
    try:
        if "grpo" in parts or "real-grpo" in parts:  # against TRL's GRPOTrainer
            import trl  # noqa: F401
    except ImportError:  # install, then start again: transformers decided at import that accelerate is missing
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", TRL], check=True)
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "scale.bench", *argv])
    torch.set_num_threads(2)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    import platform
    print(f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}; commit {commit.strip()}; medians of {flags.repeats} alternations", flush=True)
    failed, header = [], False
    for part in parts:
        tick = time.time()
        try:  # a real-model part beside others runs in a process of its own: together they outgrow 24 GB
            measured = (in_child("part", part, str(flags.repeats)) if part in REAL and len(parts) > 1
                        else (COMPARISONS.get(part) or TABLES[part])(flags.repeats))
        except Exception as error:  # one line, and the other parts still run
            print(f"part {part} failed after {time.time() - tick:.0f} s: {type(error).__name__}: {error}", flush=True)
            failed.append(part)
            continue
        if part in COMPARISONS:
            if not header:
                print("\n| comparison | A | B | A / B | goal | note |\n|---|---|---|---|---|---|")
                header = True
            for name, a, b, goal, note in measured:
                print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f} | {goal} | {note} |")
        else:
            print("\n" + "\n".join(measured) + "\n")
            header = False
        print(f"(part {part}: {time.time() - tick:.0f} s)", flush=True)
    if failed:
        sys.exit(f"parts that failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
