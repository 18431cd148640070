"""The settings and inputs of full-size runs: es_grpo.py's flags plus those of scale/ (data
files, presets, the rollout engine, ES's noise and shaping, GRPO's sharding, the run folder), one
settings object that every entry point parses once (parse_args). es_grpo.py trains on the tiny
model's built-in tasks; `python -m scale.train`, eval.py and the bench read problems from JSONL
files too (the `problems` hook of es_grpo.run: evaluation_sets). A run folder's config.json, of any
age, is read in one place: saved_settings.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import torch

import es_grpo
from es_grpo import BadInput, dataclass_parser, flag, zscore
from scale import gym
from tiny_model.tasks import FAMILIES

ROLLOUTS = ("hf", "vllm", "plain")
NOISES = ("once", "redrawn", "table")  # scale/es.py
MODES = ("auto", "on", "off")  # scale/population.py
TRACKERS = ("none", "tensorboard", "trackio", "wandb")  # scale/tracking.py
# how a run is kept and launched, not what it computes: --resume may give them anew, and a run
# made with others is the same run
LAUNCH = ("out", "overwrite", "resume", "save_every", "base_from", "check_every", "dist_timeout",
          "report_to")
# which of scale/'s machinery computes a run (the same updates, to float rounding, as the tests that
# compare the paths check): a finished run made with others is reused (analyses/training.py)
MACHINERY = ("rollout", "vllm_memory", "vllm_dtype", "vllm_max_len", "es_noise", "es_batched",
             "grpo_fsdp")


def centered(rewards: torch.Tensor) -> torch.Tensor:
    """Raw rewards less their mean; all-equal rewards give zeros."""
    return (rewards - rewards.mean()) * (rewards.max() > rewards.min())


def centered_ranks(rewards: torch.Tensor) -> torch.Tensor:
    """OpenAI ES's fitness shaping (Salimans et al., 2017): each reward's rank over N - 1, less
    one half, in [-0.5, 0.5]; tied rewards share their mean rank, so all-equal ones give zeros."""
    above = (rewards[:, None] > rewards[None, :]).sum(1)
    ties = (rewards[:, None] == rewards[None, :]).sum(1) - 1
    return (above + ties / 2) / (len(rewards) - 1) - 0.5


SHAPINGS = {"zscore": zscore, "centered": centered,  # ES's fitness shaping: rewards -> z (N,)
            "rank": centered_ranks}
AFFINE = ("zscore", "centered")  # the shapings whose z is affine in the rewards (scale/es.py)


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
    """Every setting of a run at scale: es_grpo.py's, then these; each field is a command-line
    flag."""

    es_zscore: bool = flag(True, "z-score rewards across the population (--no-es-zscore: the "
                                 "alias of --es-shaping centered)")
    data: str = flag("", "training problems, JSONL (empty: the built-in task generator)")
    eval_data: str = flag("", "evaluation problems, JSONL (empty: held out from --data)")
    task: str = flag("auto",
                     "task of --data (auto: by its fields); without --data the built-in one (auto: "
                     "countdown; add, two-digit sums, for chat models), or rg:NAME[:SETTING=VALUE,"
                     "...], a reasoning-gym task with numeric answers (scale/gym.py)",
                     TaskChoices((*es_grpo.TASKS, "math", "rg:NAME")))
    preset: str = flag("tiny", "defaults: tiny (CPU, shipped model) or paper", tuple(PRESETS))
    overwrite: bool = flag(False, "replace an existing run folder (one a run made)")
    # ES at scale (scale/es.py)
    es_shaping: str = flag("zscore", "ES's fitness shaping: zscore, centered (raw rewards less "
                                     "their mean) or rank (centred ranks, OpenAI ES's; members "
                                     "one at a time keep their eps for the update)",
                           tuple(SHAPINGS))
    es_noise: str = flag("once", "ES's eps: once (each member's drawn once, on every core, and "
                                 "summed or kept as it is scored: the update draws nothing "
                                 "again), redrawn (es_grpo.py's two draws) or table (a "
                                 "departure: one shared Gaussian table, each member an offset)",
                         NOISES)
    es_batched: str = flag("auto", "decode ES members in one batch, in the model's own dtype (HF "
                                   "rollout; auto: if greedy, without --rollout-dtype's copy, and "
                                   "the weights fit in 1 GiB or half the free GPU)", MODES)
    # GRPO at scale (scale/grpo.py, scale/distributed.py)
    grpo_epochs: int = flag(1, "optimizer steps per rollout batch", least=1)
    grpo_microbatch: int = flag(0, "rows per forward pass, whole groups (0: all)", least=0)
    grpo_autocast: bool = flag(False, "GRPO's forward and backward passes in bfloat16 autocast "
                                      "(weights, AdamW and the loss's log-softmax stay float32)")
    grpo_fsdp: bool = flag(False, "shard GRPO's trained weights, gradients, AdamW states and "
                                  "reference over the ranks (FSDP2) instead of DDP; rollouts use a "
                                  "whole copy")
    # decoding (scale/decode.py, scale/vllm_rollout.py)
    rollout: str = flag("hf", "rollout engine: hf (es_grpo.rollout with scale/decode.py's speed "
                              "layers), vllm (one engine per rank) or plain (es_grpo.rollout as "
                              "written)", ROLLOUTS)
    rollout_dtype: str = flag("model", "the weights while decoding on the HF path, evaluation "
                                       "included (model: --dtype's; else a copy in this dtype, "
                                       "refreshed as the weights change)",
                              ("model", *es_grpo.DTYPES))
    vllm_memory: float = flag(0.0, "share of GPU memory vLLM may take; the rest holds the trainer "
                                   "(0: all that the trainer leaves by scale/memory.py's "
                                   "arithmetic, at most 0.9)")
    vllm_dtype: str = flag("auto", "the engine's weights (auto: --dtype for ES alone, so that "
                                   "members are the transformers path's; bfloat16 when a GRPO "
                                   "stage runs)", ("auto", *es_grpo.DTYPES))
    vllm_max_len: int = flag(0, "vLLM max_model_len, prompt plus completion (0: the run's longest "
                                "prompt plus --max-new-tokens)")
    # the run folder and the processes (scale/runs.py, scale/distributed.py, scale/tracking.py)
    resume: str = flag("", "continue the interrupted run in this folder, with its saved flags")
    save_every: int = flag(10, "updates between checkpoints (0: only after each stage)")
    base_from: str = flag("", "take the base model's evaluation from this run folder (its settings "
                              "that reach evaluation must be this run's) instead of measuring it "
                              "again")
    check_every: int = flag(1, "updates between checks that all ranks hold identical weights (0: "
                               "at stage ends)")
    dist_timeout: int = flag(600, "seconds a rank waits for the others before it gives up")
    report_to: str = flag("none", "also log each update's metrics and each evaluation to this "
                                  "tracker as the run goes (scale/tracking.py; its package: "
                                  "scale/requirements-trackers.txt)", TRACKERS)

    def __post_init__(self):
        """--no-es-zscore is --es-shaping centered (and a config.json from before --es-shaping
        reads so); es_zscore then says whether the shaping is the z-score."""
        if not self.es_zscore and self.es_shaping == "zscore":
            self.es_shaping = "centered"
        self.es_zscore = self.es_shaping == "zscore"

    def fitness(self, rewards: torch.Tensor) -> torch.Tensor:
        return SHAPINGS[self.es_shaping](rewards)


def parse_args(argv=None, prog=None) -> Args:
    """Flags override the preset, which overrides the dataclass defaults; with --resume, the run
    folder's saved settings are the flags, and only how it is kept and launched (LAUNCH) may be
    given anew (else: as it was launched). es_grpo.py's checks read every field's range, these
    too."""
    argv = sys.argv[1:] if argv is None else argv
    parser = dataclass_parser(Args, prog, allow_abbrev=False)
    given = parser.parse_known_args(argv)[0]
    parser.set_defaults(**PRESETS[given.preset])
    if given.resume:
        saved = resumed(Path(given.resume))
        named = [token.split("=")[0] for token in argv if token.startswith("--")]
        ignored = [name for name in named if name[2:].replace("-", "_") not in LAUNCH]
        if ignored:
            parser.error(f"--resume continues a run with its saved flags: {' '.join(ignored)} "
                         f"would be ignored")
        names = {f.name for f in fields(Args)} - {"out", "overwrite", "resume"}
        launched = {k: v for k, v in saved_settings(saved).items() if k in names}
        parser.set_defaults(**vars(settings_from(saved)) | launched | {"out": given.resume})
    return es_grpo.checked(parser, Args(**vars(parser.parse_args(argv))))


def saved_settings(config: dict) -> dict:
    """A run folder's config.json as today's settings, by name. A run made when some flags were the
    launcher's (scale.train) kept them under "scale" (--rollout-dtype too, which decides a run's
    numbers); a run from before a flag: its default."""
    return (config.get("scale") or {}) | {k: v for k, v in config.items() if k != "scale"}


def settings_from(config: dict) -> Args:
    """A run folder's config.json as today's Args, how it was kept and launched (LAUNCH) left at
    the defaults: a process that trains it again or continues it is launched anew."""
    names = {f.name for f in fields(Args) if f.name not in LAUNCH}
    return Args(**{k: v for k, v in saved_settings(config).items() if k in names})


def resumed(folder: Path) -> dict:
    """The config.json of a run that --resume can continue; BadInput, one line, where it cannot: an
    unreadable folder, a finished run (its summary.json written) or one es_grpo.py made (its
    config.json has no scale.train settings). Nothing in it is touched."""
    try:
        saved = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise BadInput(f"--resume {folder}: not a resumable run folder "
                       f"({err.__class__.__name__})") from None
    if (folder / "summary.json").exists():
        raise BadInput(f"--resume {folder}: holds a finished run (summary.json): nothing to "
                       f"continue; --out elsewhere starts a new one")
    if "resume" not in saved_settings(saved):
        raise BadInput(f"--resume {folder}: holds a run es_grpo.py made (its config.json has "
                       f"no scale.train settings), which scale.train cannot continue; start it "
                       f"again with --out elsewhere")
    return saved


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
