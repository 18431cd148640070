"""Speed and memory of es_grpo.py against their physical limits and against TRL, measured side by side.

    python -m scale.bench                 # installs trl==1.16.0 if missing; prints the markdown table
    python -m scale.bench --repeats 3     # fewer alternations
    python -m scale.bench --parts precision   # a bfloat16 engine's sampling against fp32 GRPO (seconds)
    python -m scale.bench --parts verifier    # verifier seconds per 1,000 completions; its share of a step

Compared commands alternate (A, B, A, B, ...) so that drift in the machine hits both; each figure is a
median over the repeats, after one warm-up of each. Memory is the peak resident set of a separate
process per configuration. Not part of the test suite.
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
    args = dataclasses.replace(es_grpo.parse_args([]), **overrides)
    problems = es_grpo.generate_problems("countdown", 512, seed=1, exclude=es_grpo.never_trained_on())
    return model.eval(), tokenizer, args, problems


def es_runner(model, tokenizer, args, problems):
    model = copy.deepcopy(model)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    counter = iter(range(10**6))
    run, state = es_grpo.Context(args, model, tokenizer), es_grpo.ESState(params, master)
    return lambda: es_grpo.es_step(run, state, problems[:args.es_prompts], next(counter))


def grpo_runner(model, tokenizer, args, problems):
    model = copy.deepcopy(model)
    reference = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.grpo_lr, weight_decay=0.0)
    counter = iter(range(10**6))

    def step():
        seed = next(counter)
        start = seed * args.grpo_prompts % (len(problems) - args.grpo_prompts)
        return es_grpo.grpo_step(es_grpo.Context(args, model, tokenizer), es_grpo.GRPOState(optimizer, reference),
                                 problems[start:start + args.grpo_prompts], seed)
    return step


# --------------------------------------------------------------------------- ES against one batched generation


def bench_es(repeats: int) -> list[tuple]:
    model, tokenizer, args, problems = tiny_setup()
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
    tokens = {}

    def inference():
        roll = es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0))
        tokens["inference"] = roll.tokens

    batched, one_by_one = (es_runner(model, tokenizer, dataclasses.replace(args, es_batched=mode), problems)
                           for mode in ("on", "off"))
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
    model, tokenizer, args, problems = tiny_setup(es_batched="on")
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems[:args.es_prompts]] * args.es_population
    parts, spent = {"noise": "drawing eps", "score": "verifier", "es_update": "update"}, {}
    originals = {name: getattr(es_grpo, name) for name in parts}

    def timing(label, function):
        def wrapped(*a, **k):
            tick = time.perf_counter()
            result = function(*a, **k)
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - tick
            return result
        return wrapped

    step, rows = es_runner(model, tokenizer, args, problems), []
    try:
        for name, label in parts.items():
            setattr(es_grpo, name, timing(label, originals[name]))
        for round_ in range(repeats + 1):
            spent.clear()
            total = timed(step)
            plain = timed(lambda: es_grpo.rollout(model, tokenizer, prompts, args.sampling("es", 0)))
            if round_:
                rows.append({**spent, "batched generation and stacking (the rest)": total - sum(spent.values()),
                             "whole iteration": total, "plain generation of the same rows, for comparison": plain})
    finally:
        for name, function in originals.items():
            setattr(es_grpo, name, function)
    return ["| one ES iteration (tiny default, batched) | seconds |", "|---|---|"] + \
        [f"| {key} | {statistics.median(row[key] for row in rows):.3f} |" for key in rows[0]]


# --------------------------------------------------------------------------- GRPO against TRL's GRPOTrainer


def trl_steps(model, tokenizer, args, problems, steps: int) -> list[float]:
    """Seconds of each of `steps` GRPOTrainer steps at es_grpo's settings: same model, prompts, group, tokens."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": es_grpo.prompt_text(p, tokenizer), "numbers": p["numbers"], "target": p["target"]}
            for p in problems[:steps * args.grpo_prompts]]

    def countdown(completions, numbers, target, **_):
        return [es_grpo.countdown_reward(c, n, t) for c, n, t in zip(completions, numbers, target)]

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
                            report_to=[], use_cpu=True, bf16=False, shuffle_dataset=False, seed=0,
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
    _, evaluation, _ = es_grpo.evaluation_sets(args, tokenizer)
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


def child(kind: str, size: str):
    """Run one configuration and print its peak resident set (in a fresh process, so peaks do not mix)."""
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
        run = es_runner(model, tokenizer, dataclasses.replace(args, es_batched="off") if kind == "es-off" else args,
                        problems)
    else:
        run = grpo_runner(model, tokenizer, args, problems)
    for _ in range(2):
        run()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec
    peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"rss_mb": peak_kb / 1024, "rows": rows,
                      "params_m": sum(p.numel() for p in model.parameters()) / 1e6}))


def bench_memory() -> list[tuple]:
    peak = {}
    for size in ("tiny", "60M"):
        for kind in ("inference", "es", "es-off", "grpo"):
            out = subprocess.run([sys.executable, __file__, "--child", kind, size], capture_output=True, text=True,
                                 check=True).stdout
            peak[size, kind] = json.loads(out.strip().splitlines()[-1])
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
    args = es_grpo.Args()
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
    es_grpo.MATH_VERIFY.compare("1", "$1$")  # a started worker: its start is once a process
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
            verifier, total = (statistics.median(x) for x in zip(*shares))
            lines.append(f"| {name} | {verifier:.4f} | {total:.3f} | {verifier / total:.1%} |")
    finally:
        es_grpo.score = original
    return lines


PARTS = ("es", "grpo", "eval", "memory", "growth", "profile", "precision", "verifier")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scale.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="alternations of each comparison")
    parser.add_argument("--parts", default=",".join(PARTS), help="which comparisons to run, comma-separated")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    flags = parser.parse_args(argv)
    if flags.child:
        return child(*flags.child)
    unknown = set(flags.parts.split(",")) - set(PARTS)
    if unknown or flags.repeats < 1:
        parser.error(f"--parts: the parts are {', '.join(PARTS)}; --repeats at least 1"
                     + (f" (not {', '.join(sorted(unknown))})" if unknown else ""))
    try:
        if "grpo" in flags.parts.split(","):  # against TRL's GRPOTrainer
            import trl  # noqa: F401
    except ImportError:  # install, then start again: transformers decided at import that accelerate is missing
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", TRL], check=True)
        os.execv(sys.executable, [sys.executable, *sys.argv])
    torch.set_num_threads(2)
    tick = time.time()
    parts = flags.parts.split(",")
    rows = ((bench_es(flags.repeats) if "es" in parts else []) + (bench_grpo(flags.repeats) if "grpo" in parts else [])
            + (bench_eval(flags.repeats) if "eval" in parts else []) + (bench_memory() if "memory" in parts else []))
    growth = bench_growth(flags.repeats) if "growth" in parts else []
    profile = bench_profile(flags.repeats) if "profile" in parts else []
    profile += bench_precision() if "precision" in parts else []
    profile += [""] + bench_verifier(flags.repeats) if "verifier" in parts else []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    import platform
    print(f"\nMachine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}; commit {commit.strip()}; {time.time() - tick:.0f} s; medians of "
          f"{flags.repeats} alternations\n")
    print("| comparison | A | B | A / B | goal | note |\n|---|---|---|---|---|---|")
    for name, a, b, goal, note in rows:
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f} | {goal} | {note} |")
    print("\n" + "\n".join(growth) + "\n\n" + "\n".join(profile))


if __name__ == "__main__":
    main()
