"""The synthetic problems the shipped tiny model knows, the stand-in for the paper's GSM8K
(es_grpo.py, departure 1): Countdown (trained with ES and GRPO), digit addition and digit sorting
(held out, to measure forgetting). Each family is a seeded stream; its first EVAL_POOL problems
under the test and dev seeds are the fixed evaluation pools, which no training step (pretraining
included) ever sees."""
from __future__ import annotations

import copy
import functools
import json
import operator
import random
from fractions import Fraction

EVAL_POOL = 500  # built-in evaluation problems: the first ones of a fixed stream, never trained on
SPLIT_SEEDS = {"test": 12345, "dev": 54321}  # report on test; tune on dev
FAMILIES = ("countdown", "add", "sort")  # the tiny model's, pretrained on (tiny_model/pretrain.py)
HELDOUT = {"countdown": ("add", "sort"),  # trained task -> held-out families: the tiny model's
           # a chat model's (README: SmolLM2-135M-Instruct half-solves none of the others)
           "add": ("word",)}
NAMES, ITEMS = (("Ava", "Ben", "Mia", "Leo", "Zoe", "Sam", "Ivy", "Max"),
                ("apples", "stickers", "marbles", "books", "cookies", "pencils", "shells"))
ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def make_problem(task: str, rng: random.Random) -> dict:
    """One problem of a family; a Countdown problem keeps a solution (pretraining's target)."""
    if task == "add":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return {"task": "add", "question": f"{a}+{b}", "answer": str(a + b)}
    # a one-step word problem, GSM8K's answer format: the chat model's held-out family
    if task == "word":
        return word_problem(rng)
    if task == "sort":
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(6, 10)))
        return {"task": "sort", "question": digits, "answer": "".join(sorted(digits))}
    while True:  # countdown: a random expression over 3 numbers with integer steps and target
        numbers = [rng.randint(1, 20) for _ in range(3)]
        a, b, c = rng.sample(numbers, 3)
        op1, op2 = rng.choice("+-*/"), rng.choice("+-*/")
        # exact; the numbers are at least 1, so no division by zero
        inner = ARITHMETIC[op1](Fraction(a), b)
        if inner.denominator != 1 or inner <= 0:
            continue
        outer_first = rng.random() < 0.5
        solution = f"({a}{op1}{b}){op2}{c}" if outer_first else f"{c}{op2}({a}{op1}{b})"
        value = ARITHMETIC[op2](inner, c) if outer_first else ARITHMETIC[op2](Fraction(c), inner)
        if value.denominator == 1 and 0 < value <= 100:
            return {"task": "countdown", "numbers": numbers, "target": int(value),
                    "solution": solution}


def word_problem(rng: random.Random) -> dict:
    name, item, kind = rng.choice(NAMES), rng.choice(ITEMS), rng.randrange(4)
    a, b = rng.randint(5, 60), rng.randint(2, 9)
    question, answer = [
        (f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?", a + b),
        (f"{name} has {a + b} {item} and gives away {b}. How many {item} are left?", a),
        (f"{name} buys {b} boxes of {item} with {a % 12 + 2} in each box. How many {item} is that?",
         b * (a % 12 + 2)),
        (f"{name} shares {a * b} {item} equally among {b} friends. How many does each friend get?",
         a)][kind]
    return {"task": "math", "question": question, "answer": f"#### {answer}"}


def problem_key(problem: dict) -> str:
    return json.dumps([problem.get(k) for k in ("task", "numbers", "target", "question")])


def generate_problems(task: str, count: int, seed: int, exclude: set = frozenset()) -> list[dict]:
    """The first `count` distinct problems of a family's stream for `seed`, skipping those in
    exclude. Made once per process (generating a run's training problems is slow) and handed out as
    copies."""
    return copy.deepcopy(list(stream_prefix(task, count, seed, frozenset(exclude))))


@functools.lru_cache(maxsize=32)
def stream_prefix(task: str, count: int, seed: int, exclude: frozenset) -> tuple[dict, ...]:
    rng, problems, seen = random.Random(f"{task}-{seed}"), [], set(exclude)
    for _ in range(100 * count):
        problem = make_problem(task, rng)
        if problem_key(problem) not in seen:
            seen.add(problem_key(problem))
            problems.append(problem)
        if len(problems) == count:
            return tuple(problems)
    raise RuntimeError(f"the {task} generator ran out of distinct problems")


def evaluation_pool(task: str, split: str = "test") -> list[dict]:
    return generate_problems(task, EVAL_POOL, seed=SPLIT_SEEDS[split])


@functools.lru_cache(maxsize=1)
def never_trained_on() -> frozenset:
    """Keys of every evaluation problem, of every family and split."""
    return frozenset(problem_key(p) for task in FAMILIES for split in SPLIT_SEEDS
                     for p in evaluation_pool(task, split))
