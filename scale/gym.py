"""reasoning-gym's procedural tasks behind the project's own bounded grader: --task rg:NAME.

    python -m scale.train --model models/SmolLM2-135M-Instruct --task rg:chain_sum:max_terms=3

`rg:NAME[:SETTING=VALUE,...]` names a reasoning-gym dataset and its settings (its config class's
fields: reasoning_gym.factory.DATASETS). Its problems are generated as the built-in tasks' are: the
evaluation splits fixed across runs (test and dev, from tiny_model/tasks.py's SPLIT_SEEDS), the
training problems from the run's seed, with any question of either split removed.

Grading: only tasks whose every answer is a plain number are taken, as `math` problems, and graded
by the run's grade hook (scale/verifier.py: parsed, never run, bounded in time). reasoning-gym's own
score_answer is never called: some of its scorers run Python's eval on the model's answer
(string_insertion, spiral_matrix, binary_matrix, n_queens in 0.1.25), and none of those tasks has
numeric answers, so they are refused here. The package is optional:
scale/requirements-tasks.txt.
"""
from __future__ import annotations

import json
import re
import warnings

from es_grpo import BadInput
from tiny_model.tasks import SPLIT_SEEDS

PREFIX = "rg:"
INSTALL = "pip install -r scale/requirements-tasks.txt"
TRAIN_PROBLEMS = 2000  # drawn from as the built-in tasks' 5000 are; generated in seconds
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")  # an answer the grader reads as the value it is


def parse_task(spec: str) -> tuple[str, dict]:
    """("chain_sum", {"max_terms": 3}) of "rg:chain_sum:max_terms=3"; each value as JSON reads it
    (3, 0.5, true), else as the string given."""
    name, _, settings = spec[len(PREFIX):].partition(":")
    config = {}
    for item in filter(None, settings.split(",")):
        key, equals, value = item.partition("=")
        if not (key.strip() and equals):
            raise BadInput(f"--task {spec}: settings are NAME=VALUE, separated by commas")
        try:
            config[key.strip()] = json.loads(value)
        except ValueError:
            config[key.strip()] = value
    return name, config


def generate(spec: str, seed: int, size: int) -> list[dict]:
    """`size` math problems {task, question, answer, source} of the task, from `seed`."""
    name, config = parse_task(spec)
    try:
        with warnings.catch_warnings():  # its dependencies' SyntaxWarnings, at import
            warnings.simplefilter("ignore")
            import reasoning_gym
    except ImportError:
        raise BadInput(f"--task {spec}: reasoning-gym is not installed ({INSTALL})") from None
    if name not in reasoning_gym.factory.DATASETS:
        raise BadInput(f"--task {spec}: reasoning-gym has no task {name!r} "
                       "(reasoning_gym.factory.DATASETS lists them)")
    try:
        entries = list(reasoning_gym.create_dataset(name, seed=seed, size=size, **config))
    except Exception as err:  # noqa: BLE001 (a setting its config refuses: one line)
        raise BadInput(f"--task {spec}: reasoning-gym refused the settings "
                       f"({err.__class__.__name__}: {str(err)[:200]})") from None
    for entry in entries:
        if not NUMBER.fullmatch(str(entry["answer"]).strip()):
            raise BadInput(f"--task {spec}: its answers are not plain numbers (e.g. "
                           f"{str(entry['answer'])[:40]!r}); the project's grader takes tasks "
                           "with numeric answers only")
    return [{"task": "math", "question": entry["question"], "answer": str(entry["answer"]).strip(),
             "source": spec} for entry in entries]


def splits(spec: str, seed: int, eval_problems: int, eval_split: str) -> tuple[list, list]:
    """(train, evaluation): the evaluation split fixed across runs, the training problems from the
    run's seed, none of them a question of the test or dev split."""
    held = {split: generate(spec, split_seed, eval_problems)
            for split, split_seed in SPLIT_SEEDS.items()}
    kept = {problem["question"] for problems in held.values() for problem in problems}
    # a seed of its own, never a split's: the run's seeds are small numbers
    train = [problem for problem in generate(spec, 1_000_003 * (seed + 1), TRAIN_PROBLEMS)
             if problem["question"] not in kept]
    if len(train) < TRAIN_PROBLEMS // 2:
        raise BadInput(f"--task {spec}: fewer than {TRAIN_PROBLEMS // 2} training problems differ "
                       "from the evaluation splits' (a setting that allows too few problems)")
    return train, held[eval_split]
