"""How the real model's task was chosen (part tasks): SmolLM2-135M-Instruct on candidate task
families, generated here, and on the built-in ones."""
from __future__ import annotations

import dataclasses
import random

import es_grpo
from scale.assembly import context
from scale.bench.real import real_setup
from tiny_model.tasks import ITEMS, NAMES


def sum_or_product(a: int, op: str, b: int) -> dict:
    return {"task": "add", "question": f"{a}{op}{b}", "answer": str(a + b if op == "+" else a * b)}


def two_step_word_problem(rng) -> dict:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(10, 60), rng.randint(2, 9), rng.randint(2, 9)
    question = (f"{name} has {a} {item}, gets {b} more, then gives away {c}. "
                f"How many {item} does {name} have now?")
    return {"task": "math", "question": question, "answer": f"#### {a + b - c}"}


# generated families measured against the built-in ones when the real model's task was chosen
TASK_CANDIDATES = {
    "one-digit sums": lambda rng: sum_or_product(rng.randint(2, 9), "+", rng.randint(2, 9)),
    "two-digit + one-digit sums": lambda rng: sum_or_product(rng.randint(10, 99), "+",
                                                             rng.randint(2, 9)),
    "three-digit sums": lambda rng: sum_or_product(rng.randint(100, 999), "+",
                                                   rng.randint(100, 999)),
    "one-digit products": lambda rng: sum_or_product(rng.randint(2, 9), "*", rng.randint(2, 9)),
    "two-digit x one-digit products": lambda rng: sum_or_product(rng.randint(10, 99), "*",
                                                                 rng.randint(2, 9)),
    "two-step word problems": two_step_word_problem}


# reasoning-gym's tasks (scale/gym.py) with numeric answers, from sums like the built-in task's to
# GSM8K-style word problems
RG_CANDIDATES = ("rg:chain_sum:min_terms=2,max_terms=2,min_digits=2,max_digits=2",
                 "rg:chain_sum:min_terms=3,max_terms=3,min_digits=1,max_digits=2",
                 "rg:basic_arithmetic:min_terms=2,max_terms=3,max_digits=2",
                 "rg:gsm_symbolic")


def bench_tasks(repeats: int) -> list[str]:
    """SmolLM2-135M-Instruct on each candidate task family, as its task was chosen
    (docs/real-model.md)."""
    families = {name: [make(random.Random(f"{name}-{i}")) for i in range(100)]
                for name, make in TASK_CANDIDATES.items()}
    families |= {f"built-in {task}": es_grpo.evaluation_pool(task, "dev")[:100]
                 for task in ("add", "word", "sort", "countdown")}
    return measure_families(families)


def bench_rg_tasks(repeats: int) -> list[str]:
    """The same on reasoning-gym's tasks: 100 dev problems of each (scale/gym.py's split)."""
    from scale import gym
    return measure_families({task: gym.splits(task, 0, 100, "dev")[1] for task in RG_CANDIDATES})


def measure_families(families: dict[str, list[dict]]) -> list[str]:
    """Pass@1 of 2 samples on each of 100 problems at the evaluation temperature (0.6), up to 256
    new tokens, the project's grader and chat prompts, decoded in bfloat16; the share of answers in
    the right format and their lengths."""
    model, tokenizer, args, _ = real_setup("bfloat16")
    # a run's HF path and grader
    run = context(dataclasses.replace(args, rollout="hf"), model, tokenizer)
    lines = ["| family (100 problems x 2 samples, T=0.6) | pass@1 | final answer | mean tokens | "
             "95th pct |", "|---|---|---|---|---|"]
    for name, problems in families.items():
        rows = [p for p in problems for _ in range(2)]
        roll = run.generate(model, tokenizer, [es_grpo.prompt_text(p, tokenizer) for p in rows],
                            es_grpo.Sampling(0.6, 1.0, 256, 0, 256))
        rewards = es_grpo.score(run, rows, roll.texts)
        lengths = roll.completion_mask.sum(1).float()
        right, answered = float((rewards == 1).float().mean()), float((rewards > 0).float().mean())
        lines.append(f"| {name} | {right:.3f} | {answered:.2f} | {float(lengths.mean()):.0f} | "
                     f"{float(lengths.quantile(0.95)):.0f} |")
        print(lines[-1], flush=True)
    return lines
