"""The settings and inputs of full-size runs: es_grpo.py's flags plus data files, presets,
--overwrite and the flags of scale/grpo.py's step. es_grpo.py trains on the tiny model's built-in
tasks; `python -m scale.train`, eval.py and the bench parse these flags (parse_args) and read
problems from JSONL files (the `problems` hook of es_grpo.run: evaluation_sets).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import es_grpo
from es_grpo import BadInput, dataclass_parser, flag
from scale import gym
from tiny_model.tasks import FAMILIES


class TaskChoices(tuple):
    """--task's choices: these names, and any rg:NAME (scale/gym.py: reasoning-gym's tasks)."""

    def __contains__(self, value) -> bool:
        return super().__contains__(value) or str(value).startswith(gym.PREFIX)

PRESETS = {
    "tiny": {},
    "paper": dict(es_population=32, es_sigma=1.5e-3, es_alpha=2.5e-4, es_prompts=64,
                  es_temperature=0.0,
                  grpo_prompts=64, grpo_group=8, grpo_lr=1e-6, grpo_temperature=1.0, grpo_clip=0.2,
                  grpo_beta=1e-3, max_new_tokens=1024, rollout_batch=512, eval_problems=500),
}


@dataclass
class Args(es_grpo.Args):
    """Every hyperparameter of a run; each field is a command-line flag."""

    data: str = flag("", "training problems, JSONL (empty: the built-in task generator)")
    eval_data: str = flag("", "evaluation problems, JSONL (empty: held out from --data)")
    task: str = flag("auto",
                     "task of --data (auto: by its fields); without --data the built-in one (auto: "
                     "countdown; add, two-digit sums, for chat models), or rg:NAME[:SETTING=VALUE,"
                     "...], a reasoning-gym task with numeric answers (scale/gym.py)",
                     TaskChoices((*es_grpo.TASKS, "math", "rg:NAME")))
    preset: str = flag("tiny", "defaults: tiny (CPU, shipped model) or paper", tuple(PRESETS))
    overwrite: bool = flag(False, "replace an existing run folder (one a run made)")
    grpo_epochs: int = flag(1, "optimizer steps per rollout batch", least=1)
    grpo_microbatch: int = flag(0, "rows per forward pass, whole groups (0: all)", least=0)
    grpo_autocast: bool = flag(False,
                               "GRPO's forward and backward passes in bfloat16 autocast (weights, "
                               "AdamW "
                                      "and the loss's log-softmax stay float32)")
    rollout_dtype: str = flag("model",
                              "the weights while decoding on the HF path, evaluation included "
                              "(model: "
                                       "--dtype's; else a copy in this dtype, refreshed as the "
                                       "weights change)",
                              ("model", *es_grpo.DTYPES))


def parse_args(argv=None, prog=None) -> Args:
    """Flags override the preset, which overrides the dataclass defaults; es_grpo.py's checks read
    every field's range, these too."""
    parser = dataclass_parser(Args, prog)
    parser.set_defaults(**PRESETS[parser.parse_known_args(argv)[0].preset])
    return es_grpo.checked(parser, Args(**vars(parser.parse_args(argv))))


def saved_settings(config: dict) -> dict:
    """A run folder's config.json as today's settings. --rollout-dtype decides a run's numbers, so
    it is a run setting; a run made when it was the launcher's (scale.train) kept it under "scale"
    (report/NOTES.md)."""
    launcher = config.get("scale") or {}
    if "rollout_dtype" in config or "rollout_dtype" not in launcher:
        return config
    return config | {"rollout_dtype": launcher["rollout_dtype"]}


def own_flags() -> list[str]:
    """The flags this file adds to es_grpo.py's."""
    base = {f.name for f in fields(es_grpo.Args)}
    return [f"--{f.name.replace('_', '-')}" for f in fields(Args) if f.name not in base]


def evaluation_sets(args: Args, tokenizer):
    """(train, eval, held-out families): with --data, its problems (the file's last ones evaluated
    unless --eval-data); with --task rg:NAME, reasoning-gym's (scale/gym.py); else es_grpo.py's
    built-in tasks; never overlapping."""
    if args.task.startswith(gym.PREFIX):
        if args.data or args.eval_data:
            raise BadInput(f"--task {args.task} makes its own problems: --data and --eval-data "
                           "are for files")
        train, evaluation = gym.splits(args.task, args.seed, args.eval_problems, args.eval_split)
    elif not args.data:
        if args.task == "math":
            raise BadInput("--task math reads --data: the built-in tasks are "
                           + ", ".join(es_grpo.HELDOUT))
        return es_grpo.evaluation_sets(args, tokenizer)
    else:
        train, evaluation = data_files(args)
    trained = train[0]["task"]
    heldout = {task: es_grpo.evaluation_pool(task, args.eval_split)[:args.heldout_problems]
               for task in FAMILIES  # a chat model is asked any family; the tiny model not math's
               if task != trained and (tokenizer.chat_template is not None or trained != "math")}
    return train, evaluation[:args.eval_problems], heldout


def data_files(args: Args) -> tuple[list, list]:
    train = load_problems(args.data, args.task)
    if args.eval_data:
        return train, load_problems(args.eval_data, args.task)
    if len(train) < 2:  # hold out the file's last problems
        raise BadInput(f"{args.data}: needs 2 problems to hold some out (or --eval-data)")
    cut = max(1, min(args.eval_problems, len(train) // 5))
    return train[:-cut], train[-cut:]


def load_problems(path: str, task: str = "auto") -> list[dict]:
    """JSONL problems, one per line: countdown {numbers, target} or math {question, answer}."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise BadInput(f"{path}: cannot read ({err.__class__.__name__})") from None
    problems = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise BadInput(f"{path}:{number}: not valid JSON") from None
        problems.append(problem_of(record if isinstance(record, dict) else {}, task,
                                   f"{path}:{number}"))
    if not problems:
        raise BadInput(f"{path}: no problems in file")
    return problems


def problem_of(record: dict, task: str, where: str) -> dict:
    numbers, target = record.get("numbers"), record.get("target")
    if (task if task != "auto" else "countdown" if "numbers" in record else "math") == "countdown":
        if not (type(numbers) is list and numbers
                and all(type(n) is int for n in [*numbers, target])):
            raise BadInput(f"{where}: countdown needs 'numbers' (ints) and 'target' (int)")
        return {"task": "countdown", "numbers": numbers, "target": target}
    if isinstance(record.get("question"), str) and "answer" in record:
        return {"task": "math", "question": record["question"], "answer": str(record["answer"])}
    raise BadInput(f"{where}: math needs 'question' (string) and 'answer'")
