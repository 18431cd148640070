"""What every part of the bench shares: timing, child processes, the tiny setup, the steps it
times (es_grpo's ES and GRPO steps with the hooks scale/assembly.py gives a run; TRL's GRPOTrainer)
and the printing of a part's rows."""
from __future__ import annotations

import copy
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import es_grpo
from scale import config, verifier
from scale.assembly import context

ROOT = Path(__file__).resolve().parents[2]

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


def in_child(*argv: str) -> dict:
    """`python -m scale.bench --child ARGV` in a fresh process, from the repository's root: its last
    line, as JSON. A child that fails raises with the end of what it printed."""
    done = subprocess.run([sys.executable, "-m", "scale.bench", "--child", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"child {' '.join(argv)} exited {done.returncode}: "
                           f"{done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmHWM:")) / 1024


def tiny_setup(**overrides):
    model, tokenizer = es_grpo.load_model("")
    args = dataclasses.replace(config.parse_args([]), **overrides)
    problems = es_grpo.generate_problems("countdown", 512, seed=1,
                                         exclude=es_grpo.never_trained_on())
    return model.eval(), tokenizer, args, problems


def es_runner(model, tokenizer, args, problems, batched: str = "auto", grade=None):
    """One ES iteration a call, on a copy of model, decoded by es_grpo.rollout (--rollout plain),
    the population scored as --es-batched `batched` says. grade: a grade hook in place of the
    run's."""
    model = copy.deepcopy(model)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    counter = iter(range(10**6))
    run = context(dataclasses.replace(args, rollout="plain", es_batched=batched), model, tokenizer)
    run = dataclasses.replace(run, grade=grade) if grade else run
    state = es_grpo.ESState(params, master)
    return lambda: es_grpo.es_step(run, state, problems[:args.es_prompts], next(counter))


def grpo_runner(model, tokenizer, args, problems, rollout: str = "plain", grade=None):
    """One GRPO step a call (scale.train's step: the run's grpo_step hook), on a copy of model,
    decoded as --rollout `rollout` says (hf: in args.rollout_dtype). grade: a grade hook in place
    of the run's."""
    model = copy.deepcopy(model)
    reference = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.grpo_lr, weight_decay=0.0)
    counter = iter(range(10**6))
    run = context(dataclasses.replace(args, rollout=rollout), model, tokenizer)
    run = dataclasses.replace(run, grade=grade) if grade else run

    def step():
        seed = next(counter)
        start = seed * args.grpo_prompts % (len(problems) - args.grpo_prompts)
        return run.grpo_step(run, es_grpo.GRPOState(optimizer, reference),
                             problems[start:start + args.grpo_prompts], seed)
    return step


def trl_steps(model, tokenizer, args, problems, steps: int, bf16: bool = False) -> list[float]:
    """Seconds of each of `steps` GRPOTrainer steps at es_grpo's settings: same model, prompts,
    group, tokens."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": es_grpo.prompt_text(p, tokenizer), "problem": json.dumps(p)}
            for p in problems[:steps * args.grpo_prompts]]

    def reward(completions, problem, **_):  # the runs' reward (scale.verifier.grade), any task
        return [verifier.grade(json.loads(p), c)[0] for c, p in zip(completions, problem)]

    class StepTimer(TrainerCallback):
        times: list = []

        def on_step_begin(self, *_, **__):
            self.tick = time.perf_counter()

        def on_step_end(self, *_, **__):
            self.times.append(time.perf_counter() - self.tick)

    timer = StepTimer()
    timer.times = []
    with tempfile.TemporaryDirectory() as out:
        settings = GRPOConfig(
            output_dir=out, per_device_train_batch_size=args.grpo_prompts * args.grpo_group,
            num_generations=args.grpo_group, max_completion_length=args.max_new_tokens,
            learning_rate=args.grpo_lr, beta=args.grpo_beta, epsilon=args.grpo_clip,
            temperature=args.grpo_temperature, num_iterations=1, steps_per_generation=1,
            loss_type="dapo", scale_rewards="group", weight_decay=0.0, max_steps=steps,
            lr_scheduler_type="constant", warmup_steps=0, logging_steps=10**6, save_strategy="no",
            report_to=[], use_cpu=True, bf16=bf16, shuffle_dataset=False, seed=0,
            disable_dropout=True, dataloader_num_workers=0, gradient_checkpointing=False)
        trainer = GRPOTrainer(model=copy.deepcopy(model), reward_funcs=reward, args=settings,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              callbacks=[timer])
        trainer.train()
    return timer.times


COMPARISON_HEADER = "\n| comparison | A | B | A / B | goal | note |\n|---|---|---|---|---|---|"


def print_measured(measured: list, comparison: bool, header: bool) -> bool:
    """A part's rows: a comparison's (name, A, B, goal, note) as rows of the comparison table (its
    header first unless printed just before: header), or a table's own lines. Whether the next
    comparison continues a table."""
    if not comparison:
        print("\n" + "\n".join(measured) + "\n")
        return False
    if not header:
        print(COMPARISON_HEADER)
    for name, a, b, goal, note in measured:
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f} | {goal} | {note} |")
    return True
