"""Evolution strategies (ES) and GRPO for LLM reasoning, end to end, in one file.

Implements "Understanding Evolution Strategies for LLM Reasoning: Broader Reasoning
Coverage than GRPO" (arXiv 2608.27351): the ES and GRPO updates, the verifier
rewards, the unbiased Pass@K estimator and the sequential GRPO->ES schedule.

Run it (laptop, CPU, no network: trains the shipped tiny model, GRPO then ES):
    python es_grpo.py
    python es_grpo.py --algo es --steps 100 --seed 1 --out runs/es-s1
    python es_grpo.py --algo grpo-es --model Qwen/Qwen2.5-1.5B-Instruct \\
        --data gsm8k_train.jsonl --preset paper --device cuda
    python es_grpo.py --resume runs/es-s1           # continue an interrupted run
    torchrun --nproc_per_node=8 es_grpo.py --algo es --model Qwen/Qwen2.5-1.5B-Instruct \\
        --data gsm8k_train.jsonl --preset paper      # the same file, data-parallel (scale/ adds vLLM)
    python es_grpo.py pretrain                       # rebuild the shipped tiny_model/

Sections, in the paper's order: config, model, task and verifier, rollout,
Pass@K, GRPO, ES, schedule, main; after the model, what torchrun adds (the
ranks split ES members and GRPO prompts and provably keep identical weights).

Deliberate departures from the paper (all in the tiny default preset unless
marked; `--preset paper` restores the paper's settings):
 1. Model and task: a 0.86M-parameter character-level Llama pretrained here on
    synthetic Countdown (3 numbers), not Qwen/Llama on GSM8K. Held-out tasks for
    forgetting are two other synthetic families it was pretrained on (digit
    addition, digit sorting), not CSQA/HotpotQA/GPQA/MBPP.
 2. ES: sigma 1e-2 and alpha 2e-3 (paper: 1.5e-3 and 2.5e-4), tuned on the dev
    split for a model 2000x smaller; N=32, 64 prompts and greedy decoding as
    in the paper. With sampled decoding (--es-temperature > 0) every member of
    an iteration gets the same sampling noise (common random numbers); the
    paper does not say how it shares sampling noise.
 3. GRPO: learning rate 5e-5 (paper: 1e-6) and 32 prompts per step; the loss averages
    over all completion tokens of the batch (token-level, as TRL's default)
    rather than per sequence first.
 4. Every preset: ES keeps an fp32 master copy of the weights (on the CPU) and
    sets each member's weights to master + sigma * eps rather than adding and
    subtracting the noise in place, so that restoring is bit-exact and the
    update is accumulated in fp32; the accelerator still holds only the
    inference weights.
 5. Every preset: Pass@K uses 64 samples per problem (the paper: 32), so that
    Pass@64 can be reported.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import inspect
import json
import math
import os
import random
import re
import shutil
import sys
import time
from collections import Counter
from datetime import timedelta
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_optimizer_state_dict,
                                                     set_model_state_dict, set_optimizer_state_dict)
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm
from transformers import DynamicCache

HERE = Path(__file__).resolve().parent
TINY_MODEL = HERE / "tiny_model"
RANK, WORLD_SIZE, LOCAL_RANK = (int(os.environ.get(name, default)) for name, default in
                                 (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))  # set by torchrun
IS_MAIN_RANK = RANK == 0
log = tqdm.write if IS_MAIN_RANK else (lambda *a, **k: None)  # silent on other ranks, keeps the bar intact

# ----------------------------------------------------------------------------- config


def flag(default, help):
    return field(default=default, metadata={"help": help})


@dataclass
class Args:
    """Every hyperparameter of a run; each field is a command-line flag."""

    model: str = flag("", "model folder or hub id (empty: the shipped tiny model)")
    data: str = flag("", "training problems, JSONL (empty: the built-in task generator)")
    eval_data: str = flag("", "evaluation problems, JSONL (empty: held out from --data or generated)")
    task: str = flag("auto", "task of --data: auto (from the fields), countdown or math")
    algo: str = flag("grpo-es", "schedule: es, grpo, grpo-es or es-grpo")
    steps: int = flag(200, "total updates; two-stage schedules split them evenly")
    out: str = flag("", "run folder (empty: runs/ALGO-sSEED)")
    overwrite: bool = flag(False, "replace an existing run folder")
    resume: str = flag("", "continue the interrupted run in this folder (its saved config is used)")
    save_every: int = flag(10, "updates between checkpoints (0: only after each stage)")
    seed: int = flag(0, "seed of everything random")
    preset: str = flag("tiny", "defaults to start from: tiny (CPU, shipped model) or paper")
    device: str = flag("auto", "cpu, cuda, ... (auto: cuda if available)")
    dtype: str = flag("float32", "weights dtype; bfloat16 halves ES memory (its update stays fp32), GRPO wants float32")
    max_new_tokens: int = flag(12, "longest completion, in tokens")
    rollout_batch: int = flag(2048, "most sequences decoded at once")
    check_every: int = flag(1, "updates between checks that all torchrun ranks hold identical weights")
    dist_timeout: int = flag(600, "seconds a torchrun rank waits for the others before it gives up")
    # ES (paper: N=32, sigma 1.5e-3, alpha 2.5e-4, 64 prompts, greedy)
    es_population: int = flag(32, "ES population size N")
    es_sigma: float = flag(1e-2, "ES noise scale sigma")
    es_alpha: float = flag(2e-3, "ES step size alpha (1/sigma folded in)")
    es_prompts: int = flag(64, "prompts each ES member is scored on, per iteration")
    es_temperature: float = flag(0.0, "ES decoding temperature (0: greedy, the paper's easy setting)")
    es_zscore: bool = flag(True, "z-score rewards across the population")
    es_batched: str = flag("auto", "decode many members in one batch (HF rollout): on, off, auto (on when "
                                   "greedy and their weights fit in 1 GiB, or half the free GPU memory)")
    # GRPO (paper: 8 samples/prompt, lr 1e-6, temperature 1.0, clip 0.2, beta 0.001)
    grpo_prompts: int = flag(32, "prompts per GRPO step")
    grpo_group: int = flag(8, "samples per prompt (the group)")
    grpo_lr: float = flag(5e-5, "AdamW learning rate")
    grpo_temperature: float = flag(1.0, "GRPO sampling temperature")
    grpo_clip: float = flag(0.2, "PPO clip range epsilon")
    grpo_beta: float = flag(1e-3, "k3 KL coefficient to the starting model")
    grpo_scale_std: bool = flag(True, "divide group advantages by the group std")
    grpo_epochs: int = flag(1, "optimizer steps per rollout batch")
    grpo_microbatch: int = flag(0, "rows per GRPO forward pass, whole groups, gradients accumulated (0: all rows)")
    grpo_fsdp: bool = flag(False, "under torchrun, shard GRPO's trained weights, gradients, AdamW states and "
                                  "reference over the ranks (FSDP2) instead of DDP; rollouts use a whole copy")
    # evaluation (paper: temperature 0.6)
    eval_problems: int = flag(100, "held-out evaluation problems")
    eval_split: str = flag("test", "built-in evaluation problems: test (to report) or dev (to tune on)")
    heldout_problems: int = flag(50, "problems per held-out task family (forgetting)")
    eval_samples: int = flag(64, "samples per problem for Pass@K")
    eval_temperature: float = flag(0.6, "evaluation sampling temperature")
    eval_top_p: float = flag(1.0, "evaluation nucleus (top-p) sampling")


PRESETS = {
    "tiny": {},
    "paper": dict(es_population=32, es_sigma=1.5e-3, es_alpha=2.5e-4, es_prompts=64,
                  es_temperature=0.0, grpo_prompts=64, grpo_group=8, grpo_lr=1e-6,
                  grpo_temperature=1.0, grpo_clip=0.2, grpo_beta=1e-3, max_new_tokens=1024,
                  rollout_batch=512, eval_problems=500),
}
ALGOS = ("es", "grpo", "grpo-es", "es-grpo")
PASS_KS, MAJ_K = (1, 16, 64), 16


class OneLineErrors(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def dataclass_parser(cls, prog=None, description=None, only=None, **kwargs) -> argparse.ArgumentParser:
    """A flag per field of the dataclass (or per field named in `only`), with the field's help."""
    parser = OneLineErrors(prog=prog, description=description or cls.__doc__, **kwargs)
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        name = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(name, action=argparse.BooleanOptionalAction, default=f.default,
                                help=f.metadata["help"])
        else:
            kind = {"int": int, "float": float, "str": str}[f.type]
            parser.add_argument(name, type=kind, default=f.default, help=f.metadata["help"])
    return parser


def parse_args(argv=None) -> Args:
    """Flags override the preset, which overrides the dataclass defaults."""
    parser = dataclass_parser(Args)
    preset = parser.parse_known_args(argv)[0].preset
    if preset not in PRESETS:
        parser.error(f"--preset: unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
    parser.set_defaults(**PRESETS[preset])
    args = Args(**vars(parser.parse_args(argv)))
    problems = [
        (args.algo not in ALGOS, f"--algo: unknown {args.algo!r} (choose from {', '.join(ALGOS)})"),
        (args.steps < 1, "--steps must be at least 1"),
        (args.algo in ("grpo-es", "es-grpo") and args.steps < 2, "--steps must be at least 2 for a two-stage schedule"),
        (args.es_population < 2, "--es-population must be at least 2"),
        (args.es_sigma <= 0, "--es-sigma must be positive"),
        (args.es_alpha < 0 or args.grpo_lr < 0, "--es-alpha and --grpo-lr must not be negative"),
        (args.grpo_group < 2, "--grpo-group must be at least 2"),
        (args.save_every < 0, "--save-every must not be negative"),
        (min(args.es_prompts, args.grpo_prompts, args.eval_problems, args.max_new_tokens,
             args.rollout_batch, args.grpo_epochs) < 1, "counts (prompts, problems, tokens, batch, epochs) must be at least 1"),
        (args.eval_samples < MAJ_K, f"--eval-samples must be at least {MAJ_K} (Maj@{MAJ_K})"),
        (args.task not in ("auto", "countdown", "math"), "--task must be auto, countdown or math"),
        (args.eval_split not in SPLIT_SEEDS, "--eval-split must be test or dev"),
        (not args.data and args.eval_problems > EVAL_POOL, f"--eval-problems: the built-in set has {EVAL_POOL}"),
        (not 1 <= args.heldout_problems <= EVAL_POOL, f"--heldout-problems must be between 1 and {EVAL_POOL}"),
        (args.grpo_prompts < WORLD_SIZE, f"--grpo-prompts must be at least the number of ranks ({WORLD_SIZE})"),
        (args.grpo_fsdp and args.grpo_prompts % WORLD_SIZE,  # else ranks make different numbers of sharded passes
         f"--grpo-fsdp needs --grpo-prompts divisible by the number of ranks ({WORLD_SIZE})"),
        (args.es_batched not in ("auto", "on", "off"), "--es-batched must be auto, on or off"),
        (args.es_batched == "on" and args.es_temperature > 0, "--es-batched on needs greedy ES (--es-temperature 0)"),
        (args.grpo_microbatch < 0, "--grpo-microbatch must not be negative"),
        (args.check_every < 0 or args.dist_timeout < 1, "--check-every must not be negative, --dist-timeout positive"),
        (args.dtype not in ("float32", "bfloat16", "float16"), "--dtype must be float32, bfloat16 or float16"),
        (not 0 < args.eval_top_p <= 1, "--eval-top-p must be in (0, 1]"),
        (args.grpo_temperature <= 0 or args.eval_temperature < 0 or args.es_temperature < 0,
         "--grpo-temperature must be positive (it divides the logits), the others not negative"),
    ]
    for bad, message in problems:
        if bad:
            parser.error(message)
    args.out = args.out or f"runs/{args.algo}-s{args.seed}"
    return args


# ----------------------------------------------------------------------------- model


def load_model(name: str = "", device: str = "cpu", dtype: str = "float32"):
    """Any causal LM and its tokenizer, from a folder or a hub id ("": the shipped tiny model)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = name or str(TINY_MODEL)
    if Path(name).exists() and not (Path(name) / "config.json").exists():
        raise SystemExit(f"--model {name}: folder has no config.json (not a transformers model)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=getattr(torch, dtype))
    except (OSError, ValueError, KeyError) as err:
        raise SystemExit(f"--model {name}: cannot load a causal LM ({str(err).splitlines()[0]})")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:  # many chat models ship without one
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.to(device), tokenizer


CHARS = "0123456789+-*/(),=: ACS"


def build_tiny_model(seed: int):
    """The embedded model: a character-level tokenizer and a small Llama, both plain transformers."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(CHARS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one token per character
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="<unk>", padding_side="left")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                         tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=1)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config), tokenizer


# ----------------------------------------------------------------------------- distributed (torchrun)
# Under torchrun every rank runs this whole file. ES ranks split the population and exchange only scores;
# GRPO ranks split the prompts and DDP (or FSDP2, --grpo-fsdp) averages the gradients. Every rank then
# holds the same weights, and check_same_weights proves it. On one process each helper below does nothing.


def init_distributed(device: str, timeout_s: int) -> str:
    """Join torchrun's process group (nccl on GPUs, gloo on CPUs); returns this rank's device."""
    if WORLD_SIZE == 1:
        return device
    if device.startswith("cuda"):
        device = f"cuda:{LOCAL_RANK}"
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(seconds=timeout_s))
    return device


def all_reduce(tensor: torch.Tensor, op=None) -> torch.Tensor:
    """Sum (or op) over ranks: the same result on every rank."""
    if WORLD_SIZE == 1:
        return tensor
    reduced = tensor.to("cuda" if dist.get_backend() == "nccl" else "cpu").clone()
    dist.all_reduce(reduced, op=op or dist.ReduceOp.SUM)
    return reduced.to(tensor.device)


def all_gather_objects(item) -> list:
    if WORLD_SIZE == 1:
        return [item]
    gathered = [None] * WORLD_SIZE
    dist.all_gather_object(gathered, item)
    return gathered


def shard(model):
    """FSDP2 (ZeRO-3): each decoder layer's tensors, then the rest, split over the ranks; a layer's whole
    weights exist only while it runs. The layers are the classes transformers itself keeps unsplit."""
    for layer in [m for m in model.modules() if type(m).__name__ in (model._no_split_modules or [])]:
        fully_shard(layer)
    fully_shard(model)
    return model


@torch.no_grad()
def gather_into(model, trainer):
    """After an FSDP step: every rank copies the trained shards, made whole, into the model rollouts use."""
    if isinstance(trainer, FSDPModule):
        for whole, part in zip(model.parameters(), trainer.parameters()):
            whole.copy_(part.full_tensor())


WHOLE_STATE = StateDictOptions(full_state_dict=True, cpu_offload=True)  # checkpoints: whole tensors, on rank 0


def barrier():
    if WORLD_SIZE > 1:
        dist.barrier()


@torch.no_grad()
def check_same_weights(params: list[torch.Tensor], where: str):
    """Stop every rank if any two hold different weights (compares each tensor's float64 sum and sum of squares)."""
    if WORLD_SIZE == 1:
        return
    local = torch.zeros(len(params), 2, dtype=torch.float64, device=params[0].device)  # (tensors, 2)
    for row, param in zip(local, params):
        for chunk in param.detach().flatten().split(1 << 22):  # never a float64 copy of a whole embedding
            chunk = chunk.double()
            row += torch.stack([chunk.sum(), chunk.square().sum()])
    local = local.flatten()  # (2 * tensors,)
    differ = all_reduce(local, dist.ReduceOp.MAX) != all_reduce(local, dist.ReduceOp.MIN)
    if differ.any():
        raise SystemExit(f"{where}: ranks hold different weights (tensor {int(differ.nonzero()[0]) // 2} differs first); stopped")


# ----------------------------------------------------------------------------- task and verifier
# Rewards as in the paper: 1.0 correct, 0.1 right format but wrong answer, 0 otherwise.
# Model text is only ever matched and parsed here, never evaluated as code; each
# check is bounded in length and nesting, so a hostile completion costs microseconds.

MAX_EXPR_CHARS, MAX_DEPTH, MAX_NUMBER_CHARS = 256, 32, 64
EXPR_TOKEN = re.compile(r"\s*(?:([0-9]+)|([-+*/()]))")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


def parse_expression(text: str):
    """(value, literals) of an arithmetic expression of integers, + - * / and parentheses; None if malformed.

    value is a Fraction, or None on division by zero."""
    tokens, pos = [], 0
    text = text.strip()
    if not text or len(text) > MAX_EXPR_CHARS:
        return None
    while pos < len(text):
        match = EXPR_TOKEN.match(text, pos)
        if not match:
            return None
        tokens.append(match.group(1) or match.group(2))
        pos = match.end()
    literals, cursor = [], 0

    def peek():
        return tokens[cursor] if cursor < len(tokens) else None

    def take():
        nonlocal cursor
        cursor += 1
        return tokens[cursor - 1]

    def binary(operand, ops, depth):
        value = operand(depth)
        while peek() is not None and peek() in ops:
            op, right = take(), operand(depth)
            if value is None or right is None:
                value = None
            elif op == "+":
                value += right
            elif op == "-":
                value -= right
            elif op == "*":
                value *= right
            else:
                value = None if right == 0 else value / right
        return value

    def atom(depth):
        if depth > MAX_DEPTH:
            raise ValueError("too deep")
        token = take() if peek() is not None else None
        if token == "(":
            value = binary(term, "+-", depth + 1)
            if peek() != ")":
                raise ValueError("unbalanced")
            take()
            return value
        if token is None or not token.isascii() or not token.isdigit() or len(token) > MAX_NUMBER_CHARS:
            raise ValueError("expected a number")
        literals.append(int(token))
        return Fraction(int(token))

    def term(depth):
        return binary(atom, "*/", depth)

    try:
        value = binary(term, "+-", 0)
    except (ValueError, IndexError):
        return None
    return (value, literals) if cursor == len(tokens) else None


def countdown_reward(completion: str, numbers: list[int], target: int) -> float:
    """1.0 if the answer uses every number exactly once and equals target; 0.1 if it is a well-formed
    expression; else 0. The answer is the last <answer>...</answer> if any, else the first line."""
    tagged = ANSWER_TAG.findall(completion[-4 * MAX_EXPR_CHARS:])
    answer = tagged[-1] if tagged else completion.strip().split("\n", 1)[0]
    parsed = parse_expression(answer)
    if parsed is None:
        return 0.0
    value, literals = parsed
    correct = sorted(literals) == sorted(numbers) and value is not None and value == target
    return 1.0 if correct else 0.1


NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")


def extract_number(text: str) -> Fraction | None:
    """The final answer of a math completion: the last \\boxed{...} if any, else the last number."""
    start = text.rfind("\\boxed{")
    if start >= 0:
        depth, end = 1, start + len("\\boxed{")
        stop = min(len(text), end + MAX_EXPR_CHARS)
        while end < stop and depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        text = text[start + len("\\boxed{"): end - 1] if depth == 0 else ""
    numbers = NUMBER.findall(text[-MAX_EXPR_CHARS:])
    if not numbers:
        return None
    digits = numbers[-1].replace(",", "")
    try:
        return Fraction(digits) if len(digits) <= MAX_NUMBER_CHARS else None
    except (ValueError, ZeroDivisionError):
        return None


def math_reward(completion: str, answer: str) -> float:
    """1.0 if the final answer equals the reference (GSM8K "... #### 42" or a bare number); 0.1 if the
    completion has a final answer at all; else 0."""
    predicted = extract_number(completion)
    if predicted is None:
        return 0.0
    return 1.0 if predicted == extract_number(str(answer).split("####")[-1]) else 0.1


def make_problem(task: str, rng: random.Random) -> dict:
    """One problem of a built-in family: countdown (trained), add and sort (held out)."""
    if task == "add":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return {"task": "add", "question": f"{a}+{b}", "answer": str(a + b)}
    if task == "sort":
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(6, 10)))
        return {"task": "sort", "question": digits, "answer": "".join(sorted(digits))}
    while True:  # countdown: a random expression over 3 numbers with integer steps and target
        numbers = [rng.randint(1, 20) for _ in range(3)]
        a, b, c = rng.sample(numbers, 3)
        op1, op2 = rng.choice("+-*/"), rng.choice("+-*/")
        inner = parse_expression(f"{a}{op1}{b}")[0]
        if inner is None or inner.denominator != 1 or inner <= 0:
            continue
        solution = f"({a}{op1}{b}){op2}{c}" if rng.random() < 0.5 else f"{c}{op2}({a}{op1}{b})"
        value = parse_expression(solution)[0]
        if value is not None and value.denominator == 1 and 0 < value <= 100:
            return {"task": "countdown", "numbers": numbers, "target": int(value), "solution": solution}


def problem_key(problem: dict) -> str:
    return json.dumps([problem.get(k) for k in ("task", "numbers", "target", "question")])


def generate_problems(task: str, count: int, seed: int, exclude: set = frozenset()) -> list[dict]:
    rng, problems, seen = random.Random(f"{task}-{seed}"), [], set(exclude)
    for _ in range(100 * count):
        problem = make_problem(task, rng)
        if problem_key(problem) not in seen:
            seen.add(problem_key(problem))
            problems.append(problem)
        if len(problems) == count:
            return problems
    raise RuntimeError(f"the {task} generator ran out of distinct problems")


EVAL_POOL = 500  # built-in evaluation problems: the first ones of a fixed stream, never trained on
SPLIT_SEEDS = {"test": 12345, "dev": 54321}  # report on test; tune on dev


def evaluation_pool(task: str, split: str = "test") -> list[dict]:
    return generate_problems(task, EVAL_POOL, seed=SPLIT_SEEDS[split])


def never_trained_on() -> set:
    return {problem_key(p) for task in ("countdown", "add", "sort") for split in SPLIT_SEEDS
            for p in evaluation_pool(task, split)}


def load_problems(path: str, task: str = "auto") -> list[dict]:
    """JSONL problems, one per line: countdown {numbers, target} or math {question, answer}."""
    problems = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise SystemExit(f"{path}: cannot read ({err.__class__.__name__})")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(f"{path}:{number}: not valid JSON")
        kind = task if task != "auto" else ("countdown" if isinstance(record, dict) and "numbers" in record else "math")
        if kind == "countdown":
            ok = (isinstance(record, dict) and isinstance(record.get("numbers"), list) and record["numbers"]
                  and all(type(n) is int for n in record["numbers"]) and type(record.get("target")) is int)
            if not ok:
                raise SystemExit(f"{path}:{number}: countdown needs 'numbers' (list of ints) and 'target' (int)")
            problems.append({"task": "countdown", "numbers": record["numbers"], "target": record["target"]})
        else:
            if not (isinstance(record, dict) and isinstance(record.get("question"), str) and "answer" in record):
                raise SystemExit(f"{path}:{number}: math needs 'question' (string) and 'answer'")
            problems.append({"task": "math", "question": record["question"], "answer": str(record["answer"])})
    if not problems:
        raise SystemExit(f"{path}: no problems in file")
    return problems


def prompt_text(problem: dict, tokenizer) -> str:
    """The prompt: a compact one for the character-level model, a chat turn for chat models."""
    task = problem["task"]
    if tokenizer.chat_template is None:
        if task == "countdown":
            return "C" + ",".join(map(str, problem["numbers"])) + f"={problem['target']}:"
        return {"add": "A", "sort": "S"}.get(task, "") + problem["question"] + ":"
    if task == "countdown":
        user = (f"Using the numbers {problem['numbers']}, each exactly once, with + - * / and parentheses, "
                f"write an expression equal to {problem['target']}. Give only the expression inside <answer></answer>.")
    elif task == "sort":
        user = f"Sort the digits {problem['question']} in ascending order. Put the result in \\boxed{{}}."
    elif task == "add":
        user = f"What is {problem['question']}? Put the final answer in \\boxed{{}}."
    else:
        user = problem["question"] + "\nPut the final answer in \\boxed{}."
    return tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)


def reward(problem: dict, completion: str) -> float:
    if problem["task"] == "countdown":
        return countdown_reward(completion, problem["numbers"], problem["target"])
    return math_reward(completion, problem["answer"])


def answer_key(problem: dict, completion: str) -> str:
    """What a majority vote compares: the number, or the expression without spaces."""
    if problem["task"] == "countdown":
        tagged = ANSWER_TAG.findall(completion)
        return re.sub(r"\s", "", tagged[-1] if tagged else completion.strip().split("\n", 1)[0])
    return str(extract_number(completion))


# ----------------------------------------------------------------------------- rollout


@dataclass
class Rollout:
    """Completions of a batch of prompts; tensors are (B, P) for the prompt and (B, T) for the completion."""

    texts: list[str]
    prompt_ids: torch.Tensor  # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    completion_ids: torch.Tensor  # (B, T) right-padded, EOS included
    completion_mask: torch.Tensor  # (B, T)
    logprobs: torch.Tensor  # (B, T) log-prob of each sampled token under the model (temperature 1)
    entropy: torch.Tensor  # (B, T) full-vocabulary entropy of the model (temperature 1) at each token

    @property
    def tokens(self) -> int:
        return int(self.completion_mask.sum())

    def rows(self, index: slice) -> Rollout:
        return Rollout(self.texts[index], *(getattr(self, f.name)[index] for f in dataclasses.fields(self)[1:]))


def cache_argument(model) -> str:
    """transformers 5 renamed past_key_values to cache."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def sample_tokens(logits, temperature, top_p, uniform):
    """Inverse-CDF sampling in vocabulary order (greedy at temperature 0); logits (B, V), uniform (B,)."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, -1)  # (B, V)
    if top_p < 1:
        sorted_probs, order = probs.sort(-1, descending=True)
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p  # (B, V) tokens outside the nucleus
        probs = probs.masked_fill(drop.scatter(-1, order, drop), 0.0)
    cdf = probs.cumsum(-1)  # (B, V)
    choice = torch.searchsorted(cdf, (uniform * cdf[:, -1]).unsqueeze(-1)).squeeze(-1)  # (B,)
    return choice.clamp(max=logits.shape[-1] - 1)


@torch.no_grad()
def rollout(model, tokenizer, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
            max_new_tokens: int = 12, seed: int = 0, batch_size: int = 2048, first_row: int = 0,
            total_rows: int | None = None) -> Rollout:
    """Decode completions of prompts (greedy at temperature 0), stopping at EOS.

    The same seed gives every member of a population the same sampling noise. prompts may be rows
    first_row.. of a larger batch of total_rows (a rank's share): each row still gets the noise it gets
    in the whole batch, decoded in chunks of batch_size. The signature is the contract that the vLLM
    backend in scale/ fills too."""
    end = first_row + len(prompts)
    total_rows = total_rows or end
    cuts = [first_row, *range(first_row - first_row % batch_size + batch_size, end, batch_size), end]
    if len(cuts) > 2:  # one call per chunk of the whole batch
        parts = [rollout(model, tokenizer, prompts[a - first_row:b - first_row], temperature=temperature, top_p=top_p,
                         max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size, first_row=a,
                         total_rows=total_rows) for a, b in zip(cuts, cuts[1:])]
        return concat_rollouts(parts, tokenizer.pad_token_id)
    chunk = first_row - first_row % batch_size  # the rows of a chunk share a generator seeded by its first row
    drawn = slice(first_row - chunk, end - chunk)  # this call's rows among the chunk's uniforms
    width = min(batch_size, total_rows - chunk)
    device = next(model.parameters()).device
    encoded = tokenizer(prompts, padding=True, return_tensors="pt",
                        add_special_tokens=tokenizer.chat_template is None).to(device)
    prompt_ids, prompt_mask = encoded["input_ids"], encoded["attention_mask"]
    batch = prompt_ids.shape[0]
    generator = torch.Generator().manual_seed(seed + chunk)
    cache = {cache_argument(model): DynamicCache(config=model.config)}
    mask = prompt_mask
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    inputs, done = prompt_ids, torch.zeros(batch, dtype=torch.bool, device=device)
    tokens, logprobs, entropies, alive = [], [], [], []
    for _ in range(max_new_tokens):
        logits = model(input_ids=inputs, attention_mask=mask, position_ids=positions, use_cache=True,
                       **cache).logits[:, -1].float()  # (B, V)
        logp = logits.log_softmax(-1)  # (B, V)
        uniform = torch.rand(width, generator=generator)[drawn].to(device)  # (B,)
        token = sample_tokens(logits, temperature, top_p, uniform)  # (B,)
        token = token.masked_fill(done, tokenizer.pad_token_id)
        tokens.append(token)
        alive.append(~done)
        logprobs.append(logp.gather(-1, token[:, None]).squeeze(-1))
        entropies.append(-(logp.exp() * logp).sum(-1))
        done = done | (token == tokenizer.eos_token_id)
        if done.all():
            break
        inputs = token[:, None]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        positions = positions[:, -1:] + 1
    completion_ids, completion_mask = torch.stack(tokens, 1), torch.stack(alive, 1).long()
    texts = tokenizer.batch_decode(completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id),
                                   skip_special_tokens=True)
    return Rollout(texts, prompt_ids, prompt_mask, completion_ids, completion_mask,
                   torch.stack(logprobs, 1) * completion_mask, torch.stack(entropies, 1) * completion_mask)


def concat_rollouts(parts: list[Rollout], pad_id: int) -> Rollout:
    def cat(name, value, left):
        width = max(getattr(p, name).shape[1] for p in parts)
        padded = []
        for p in parts:
            tensor = getattr(p, name)
            gap = (width - tensor.shape[1], 0) if left else (0, width - tensor.shape[1])
            padded.append(torch.nn.functional.pad(tensor, gap, value=value))
        return torch.cat(padded, 0)

    return Rollout(sum((p.texts for p in parts), []), cat("prompt_ids", pad_id, True), cat("prompt_mask", 0, True),
                   cat("completion_ids", pad_id, False), cat("completion_mask", 0, False),
                   cat("logprobs", 0.0, False), cat("entropy", 0.0, False))


def token_logprobs(model, roll: Rollout, temperature: float = 1.0, group: int = 1):
    """Log-prob of each completion token at temperature, and the model's entropy (temperature 1): (B, T) each.

    group > 1: rows come in runs of `group` with one prompt (GRPO's groups). The prompt then runs once per
    run and its keys and values are repeated for the completions: the same function, fewer FLOPs."""
    mask = torch.cat([roll.prompt_mask, roll.completion_mask], 1)  # (B, P+T)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+T)
    start = roll.prompt_ids.shape[1]
    if group > 1:
        unwrapped = getattr(model, "module", model)  # under DDP
        cache = {cache_argument(unwrapped): DynamicCache(config=unwrapped.config)}
        prompt = model(input_ids=roll.prompt_ids[::group], attention_mask=roll.prompt_mask[::group],
                       position_ids=positions[::group, :start], use_cache=True, **cache)
        next(iter(cache.values())).batch_repeat_interleave(group)  # differentiable: gradients reach the prompt
        logits = [prompt.logits[:, -1:].repeat_interleave(group, 0)]  # (B, 1, V) predicts the first completion token
        if roll.completion_ids.shape[1] > 1:
            logits.append(model(input_ids=roll.completion_ids[:, :-1], attention_mask=mask[:, :-1],
                                position_ids=positions[:, start:-1], use_cache=True, **cache).logits)  # (B, T-1, V)
        logits = torch.cat(logits, 1).float()  # (B, T, V)
    else:
        ids = torch.cat([roll.prompt_ids, roll.completion_ids], 1)  # (B, P+T)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        logits = logits[:, start - 1:-1].float()  # (B, T, V) predicting each completion token
    logp_all = logits.log_softmax(-1)  # (B, T, V)
    entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, T)
    if temperature != 1.0:
        logp_all = (logits / temperature).log_softmax(-1)
    logp = logp_all.gather(-1, roll.completion_ids.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return logp, entropy


def masked_mean(values: torch.Tensor, mask: torch.Tensor, count=None) -> torch.Tensor:
    """Sum over the mask's entries divided by their number (or by count)."""
    return (values * mask).sum() / (mask.sum().clamp(min=1) if count is None else count)


def score(problems: list[dict], texts: list[str]) -> torch.Tensor:
    """Rewards of completions; problems[i] is the problem of texts[i]."""
    return torch.tensor([reward(p, t) for p, t in zip(problems, texts)])


# ----------------------------------------------------------------------------- Pass@K


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k), in the stable product form."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def maj_at_k(keys: list[str], correct: list[bool], k: int) -> float:
    """Maj@k over disjoint groups of k samples: is the most frequent answer (first seen on ties) correct?"""
    hits = []
    for start in range(0, len(keys) - k + 1, k):
        votes = Counter(keys[start:start + k])
        winner = max(votes, key=lambda key: (votes[key], -keys.index(key, start)))
        hits.append(correct[keys.index(winner, start)])
    return float(np.mean(hits))


def evaluate(model, tokenizer, problems: list[dict], args: Args, seed: int = 0, ks=PASS_KS, maj_ks=(MAJ_K,),
             progress: bool = False, generate=rollout) -> dict:
    """Pass@K, Maj@K, mean reward, token entropy and length of one model: n samples a problem, decoded in
    chunks of rollout_batch (shared out among torchrun ranks, with the same results as one process)."""
    n, size = args.eval_samples, args.rollout_batch
    rows = [p for p in problems for _ in range(n)]
    prompts = [prompt_text(p, tokenizer) for p in rows]
    scored = []  # (first row, rewards, answer keys, entropy sum, tokens) of each chunk this rank decodes
    for start in tqdm(range(0, len(prompts), size)[RANK::WORLD_SIZE], desc="eval", leave=False,
                      disable=not (progress and IS_MAIN_RANK)):
        roll = generate(model, tokenizer, prompts[start:start + size], temperature=args.eval_temperature,
                        top_p=args.eval_top_p, max_new_tokens=args.max_new_tokens, seed=seed, batch_size=size,
                        first_row=start, total_rows=len(prompts))
        chunk = rows[start:start + size]
        scored.append((start, score(chunk, roll.texts).tolist(), [answer_key(p, t) for p, t in zip(chunk, roll.texts)],
                       float(roll.entropy.sum()), roll.tokens))
    scored = sorted(part for parts in all_gather_objects(scored) for part in parts)
    rewards = torch.tensor([r for part in scored for r in part[1]]).view(len(problems), n)
    keys = [key for part in scored for key in part[2]]
    correct = rewards == 1.0
    result = {f"pass@{k}": float(np.mean([pass_at_k(n, int(c), k) for c in correct.sum(1)])) for k in ks if k <= n}
    for k in (k for k in maj_ks if k <= n):
        result[f"maj@{k}"] = float(np.mean([maj_at_k(keys[i * n:(i + 1) * n], correct[i].tolist(), k)
                                            for i in range(len(problems))]))
    tokens = sum(part[4] for part in scored)
    result["reward"] = float(rewards.mean())
    result["entropy"] = sum(part[3] for part in scored) / max(tokens, 1)
    result["length"] = tokens / len(prompts)
    return result


# ----------------------------------------------------------------------------- GRPO


def group_advantages(rewards: torch.Tensor, group: int, scale_std: bool = True) -> torch.Tensor:
    """A_i = (r_i - mean(group)) [/ std(group)]; rewards (B,) in consecutive groups; zero for zero-std groups."""
    grouped = rewards.view(-1, group)  # (B/G, G)
    centred = grouped - grouped.mean(1, keepdim=True)  # (B/G, G); rounding can leave it nonzero when all equal
    if scale_std:
        centred = centred / grouped.std(1, keepdim=True).clamp(min=1e-8)  # (B/G, G)
    constant = grouped.amax(1, keepdim=True) == grouped.amin(1, keepdim=True)  # (B/G, 1)
    return centred.masked_fill(constant, 0.0).flatten()  # (B,)


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip: float, beta: float, tokens=None):
    """Clipped surrogate plus beta * k3 KL to the reference, mean over completion tokens (PAPER.md, GRPO settings).

    logp, old_logp, ref_logp, mask: (B, T); advantages: (B,); tokens: what to divide the sums by (default:
    the mask's tokens; under torchrun this rank's share of all ranks' tokens). Returns the loss and its parts."""
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(1)  # (B, 1)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)  # (B, T)
    log_ref_ratio = ref_logp - logp  # (B, T)
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1  # (B, T) k3 estimator, >= 0
    loss = masked_mean(-surrogate + beta * kl, mask, tokens)  # ()
    clipped = ((ratio - 1).abs() > clip).float()  # (B, T)
    return loss, {"kl": float(masked_mean(kl.detach(), mask, tokens)), "clip_frac": float(masked_mean(clipped, mask, tokens))}


def grpo_step(model, reference, optimizer, tokenizer, problems: list[dict], args: Args, seed: int,
              generate=rollout, trainer=None) -> dict:
    """Sample a group per prompt, score, and take grpo_epochs AdamW steps on the clipped surrogate.

    Under torchrun each rank samples a contiguous share of the groups (the rows, and sampling noise, they
    have in the whole batch) and trainer averages the gradients: the model wrapped in DDP, or (--grpo-fsdp)
    a sharded copy whose weights are gathered into the model after the step."""
    trainer = trainer or model
    bounds = [len(problems) * rank // WORLD_SIZE for rank in range(WORLD_SIZE + 1)]
    group = [p for p in problems[bounds[RANK]:bounds[RANK + 1]] for _ in range(args.grpo_group)]
    first, total = bounds[RANK] * args.grpo_group, len(problems) * args.grpo_group
    with torch.no_grad():
        roll = generate(model, tokenizer, [prompt_text(p, tokenizer) for p in group], temperature=args.grpo_temperature,
                        max_new_tokens=args.max_new_tokens, seed=seed, batch_size=args.rollout_batch, first_row=first,
                        total_rows=total)
        rewards = score(group, roll.texts)  # (B,)
        advantages = group_advantages(rewards, args.grpo_group, args.grpo_scale_std).to(roll.completion_ids.device)
        size = max(1, args.grpo_microbatch // args.grpo_group) * args.grpo_group if args.grpo_microbatch else len(group)
        pieces = [slice(start, start + size) for start in range(0, len(group), size)]  # forward passes, whole groups
        # (B, T) each; with one epoch the sampling policy is the one being trained: its log-probs are the
        # training pass's own, detached (ratio 1), and a forward pass is saved
        old_logp = (torch.cat([token_logprobs(model, roll.rows(s), args.grpo_temperature, args.grpo_group)[0]
                               for s in pieces]) if args.grpo_epochs > 1 else None)
        ref_logp = (torch.cat([token_logprobs(reference, roll.rows(s), args.grpo_temperature, args.grpo_group)[0]
                               for s in pieces]) if args.grpo_beta else None)
        tokens = all_reduce(roll.completion_mask.sum()).clamp(min=1) / WORLD_SIZE  # () DDP averages over ranks
    trainer.train()
    for _ in range(args.grpo_epochs):
        optimizer.zero_grad(set_to_none=True)
        sums = torch.zeros(4, dtype=torch.float64)  # loss, kl, clip fraction, entropy sum over the pieces
        for s in pieces:  # gradients add up over pieces; DDP averages them over ranks after the last one
            # FSDP reduces every piece's gradients to shards at once: holding them whole would undo the sharding
            with trainer.no_sync() if isinstance(trainer, DistributedDataParallel) and s != pieces[-1] else \
                    contextlib.nullcontext():
                logp, entropy = token_logprobs(trainer, roll.rows(s), args.grpo_temperature, args.grpo_group)  # (b, T)
                loss, stats = grpo_loss(logp, logp.detach() if old_logp is None else old_logp[s],
                                        logp.detach() if ref_logp is None else ref_logp[s], advantages[s],
                                        roll.completion_mask[s], args.grpo_clip, args.grpo_beta, tokens)
                loss.backward()
            sums += torch.tensor([loss.item(), stats["kl"], stats["clip_frac"],
                                  float((entropy.detach() * roll.completion_mask[s]).sum())], dtype=torch.float64)
        optimizer.step()
    trainer.eval()
    gather_into(model, trainer)
    everyone = torch.zeros(total)  # (all ranks' B,)
    everyone[first:first + len(group)] = rewards
    everyone = all_reduce(everyone)
    grouped = everyone.view(-1, args.grpo_group)
    parts = all_reduce(torch.cat([sums, torch.tensor([roll.tokens], dtype=torch.float64)]))
    parts = parts / torch.tensor([WORLD_SIZE] * 3 + [1, 1])
    return {"reward": float(everyone.mean()), "reward_std": float(everyone.std()), "loss": float(parts[0]),
            "entropy": float(parts[3] / parts[4].clamp(min=1)), "kl": float(parts[1]), "clip_frac": float(parts[2]),
            "zero_std_frac": float((grouped.amax(1) == grouped.amin(1)).float().mean()), "sequences": total,
            "tokens": int(parts[4])}


# ----------------------------------------------------------------------------- ES


def noise(seed: int, index: int, like: torch.Tensor) -> torch.Tensor:
    """eps for tensor `index` of the member with integer `seed`: independent per tensor, regenerable."""
    generator = torch.Generator(device=like.device).manual_seed(seed * 1_000_003 + index)
    return torch.randn(like.shape, generator=generator, device=like.device, dtype=torch.float32)


def master_weights(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """The fp32 CPU copy that ES perturbs from, restores to and updates."""
    return [p.detach().float().cpu().clone() for p in params]


@torch.no_grad()
def set_weights(params: list[torch.Tensor], master: list[torch.Tensor], seed: int | None = None, sigma: float = 0.0):
    """theta <- master (+ sigma * eps_seed): perturbs in place, and restores bit-exactly with seed=None."""
    for index, (param, base) in enumerate(zip(params, master)):
        if seed is None:
            param.copy_(base)
        else:  # master + sigma * eps, computed in the buffer of eps: one temporary the size of the tensor
            param.copy_(noise(seed, index, param).mul_(sigma).add_(base.to(param.device)))


@torch.no_grad()
def es_update(params, master, seeds: list[int], z: torch.Tensor, alpha: float, drawn: dict | None = None):
    """theta <- theta + alpha * (1/N) sum_n z_n eps_n (paper's update, 1/sigma folded in), in fp32 on master.

    drawn: eps already generated, by (seed, tensor index); the rest is regenerated (the same values)."""
    drawn = drawn or {}
    for index, (param, base) in enumerate(zip(params, master)):
        step = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
        for seed, weight in zip(seeds, z.tolist()):
            if weight:
                eps = drawn.pop((seed, index), None)
                step.add_(noise(seed, index, param) if eps is None else eps, alpha=weight)
        base.add_(step.to(base.device), alpha=alpha / len(seeds))
    set_weights(params, master)


@contextlib.contextmanager
def population_forward(model, params: list[torch.Tensor], master: list[torch.Tensor], seeds: list[int], sigma: float,
                       drawn: dict):
    """Inside, row block n of every batch (rows / N rows each) runs with member n's weights master + sigma * eps_n,
    built exactly as set_weights builds them: one batched generation scores N members. The model's own weights
    are not used. Every Linear, Embedding and norm layer (y = weight * f(x)) is switched to the stacked
    weights, each as costly as the plain layer on the same rows; any other layer with weights raises
    NotImplementedError, and es_step then scores members one by one. Each eps is kept in drawn[seed, index]
    for es_update, which would otherwise draw it again."""
    index = {id(p): i for i, p in enumerate(params)}
    stacked = {}  # parameter index -> (N, *shape) member weights, shared by tied layers

    def members(param):
        i = index[id(param)]
        if i not in stacked:
            for seed in seeds:
                drawn[seed, i] = noise(seed, i, param)
            stacked[i] = torch.stack([(master[i].to(param.device) + sigma * drawn[seed, i]).to(param.dtype)
                                      for seed in seeds])
        return stacked[i]

    def by_member(x):  # (N * R, ...) -> (N, R * ..., last)
        return x.reshape(len(seeds), -1, x.shape[-1])

    def linear(layer):
        weight, bias = members(layer.weight), None if layer.bias is None else members(layer.bias)
        def forward(x):  # x: (N * R, L, in)
            out = torch.bmm(by_member(x), weight.transpose(1, 2))  # (N, R * L, out)
            return (out if bias is None else out + bias[:, None]).reshape(*x.shape[:-1], -1)
        return forward

    def embedding(layer):
        weight = members(layer.weight)  # (N, V, d)
        def forward(ids):  # ids: (N * R, L)
            member = torch.arange(len(seeds), device=ids.device).repeat_interleave(ids.shape[0] // len(seeds))
            return weight[member[:, None], ids]  # (N * R, L, d)
        return forward

    def norm(layer):
        weight, unit = members(layer.weight), copy.deepcopy(layer)
        unit.weight.data.fill_(1.0)  # unit(x) = f(x)
        probe = torch.randn(2, layer.weight.shape[0], device=layer.weight.device, dtype=layer.weight.dtype)
        if not torch.equal(layer(probe), layer.weight * unit(probe)):  # e.g. Gemma's (1 + weight) * f(x)
            raise NotImplementedError(f"{type(layer).__name__} is not weight * f(x)")
        def forward(x):  # x: (N * R, L, d)
            return (weight[:, None] * by_member(unit(x))).reshape(x.shape)
        return forward

    patched = []
    try:
        for layer in model.modules():
            own = dict(layer.named_parameters(recurse=False))
            if not own:
                continue
            if isinstance(layer, torch.nn.Linear):
                layer.forward = linear(layer)
            elif isinstance(layer, torch.nn.Embedding):
                layer.forward = embedding(layer)
            elif own.keys() == {"weight"} and own["weight"].dim() == 1:
                layer.forward = norm(layer)
            else:
                raise NotImplementedError(f"no batched form for {type(layer).__name__}")
            patched.append(layer)
        yield
    finally:
        for layer in patched:
            del layer.forward  # back to the class's forward


def population_fits(params: list[torch.Tensor], members: int) -> bool:
    """N stacked copies of the weights and their fp32 noise within 1 GiB on the CPU, or half the free GPU memory."""
    need = members * sum(p.numel() * (p.element_size() + 4) for p in params)
    device = params[0].device
    return need <= (torch.cuda.mem_get_info(device)[0] / 2 if device.type == "cuda" else 2**30)


def zscore(rewards: torch.Tensor) -> torch.Tensor:
    """(r - mean) / std across the population; all-equal rewards carry no signal and give zeros."""
    if rewards.max() == rewards.min():
        return torch.zeros_like(rewards)
    return (rewards - rewards.mean()) / rewards.std()


def binary_entropy(p: torch.Tensor) -> torch.Tensor:
    return -(torch.xlogy(p, p) + torch.xlogy(1 - p, 1 - p))


def js_succ(success: torch.Tensor) -> float:
    """Verifier-projected JS diversity: h(mean_i p_i) - mean_i h(p_i), averaged over problems.

    success: (N members, problems) success probabilities."""
    return float((binary_entropy(success.mean(0)) - binary_entropy(success).mean(0)).mean())


def es_step(model, params, master, tokenizer, problems: list[dict], args: Args, seed: int, generate=rollout) -> dict:
    """Score N perturbed copies on the same prompts (and sampling noise), then move toward the better ones.

    Under torchrun each rank scores every WORLD_SIZE-th member; the ranks exchange the scores and all apply
    the same update, regenerated from the seeds."""
    seeds = random.Random(seed).sample(range(2**31 - 1), args.es_population)
    prompts = [prompt_text(p, tokenizer) for p in problems]
    scores = torch.zeros(len(seeds), 3 + len(problems), dtype=torch.float64)  # (N, 3 + P)
    mine, drawn = list(range(RANK, len(seeds), WORLD_SIZE)), {}
    together = max(1, args.rollout_batch // len(prompts))  # members per batched generation
    batched = generate is rollout and (args.es_batched == "on" or (
        args.es_batched == "auto" and args.es_temperature == 0 and together > 1
        and population_fits(params, min(together, len(mine)))))
    for group in [mine[i:i + together] for i in range(0, len(mine), together)] if batched else [[m] for m in mine]:
        if batched:
            try:
                with population_forward(model, params, master, [seeds[m] for m in group], args.es_sigma, drawn):
                    roll = generate(model, tokenizer, prompts * len(group), temperature=args.es_temperature,
                                    max_new_tokens=args.max_new_tokens, seed=seed, batch_size=len(group) * len(prompts))
            except NotImplementedError:  # a layer it cannot batch: score the members one by one instead
                return es_step(model, params, master, tokenizer, problems, dataclasses.replace(args, es_batched="off"),
                               seed, generate)
        else:
            set_weights(params, master, seeds[group[0]], args.es_sigma)
            roll = generate(model, tokenizer, prompts, temperature=args.es_temperature,
                            max_new_tokens=args.max_new_tokens, seed=seed, batch_size=args.rollout_batch)
        for j, member in enumerate(group):
            part = roll.rows(slice(j * len(prompts), (j + 1) * len(prompts)))
            rewards = score(problems, part.texts)  # (P,)
            scores[member, :3] = torch.tensor([float(rewards.mean()), part.tokens, float(part.entropy.sum())])
            scores[member, 3:] = rewards == 1.0
    scores = all_reduce(scores)  # every rank now has every member's scores (the rows of the others were zero)
    rewards = scores[:, 0].float()  # (N,) the mean reward of each member, bit for bit as its rank computed it
    z = zscore(rewards) if args.es_zscore else (rewards - rewards.mean()) * (rewards.max() > rewards.min())
    es_update(params, master, seeds, z, args.es_alpha, drawn)
    tokens = int(scores[:, 1].sum())
    return {"reward": float(rewards.mean()), "reward_std": float(rewards.std()), "reward_max": float(rewards.max()),
            "js_succ": js_succ(scores[:, 3:].float()), "entropy": float(scores[:, 2].sum()) / max(tokens, 1),
            "sequences": len(seeds) * len(prompts), "tokens": tokens}


# ----------------------------------------------------------------------------- schedule


def stages_of(algo: str, steps: int) -> list[tuple[str, int]]:
    """The paper's sequential schedules split the update budget evenly."""
    names = algo.split("-")
    return [(name, steps // len(names) + (i < steps % len(names))) for i, name in enumerate(names)]


def train_stage(name: str, updates: int, model, tokenizer, train: list[dict], args: Args, metrics, offset: int,
                resume: dict | None, save, generate=rollout) -> dict:
    """Run one stage (es or grpo) for `updates` updates, from `resume` (a checkpoint) if given; append one
    metrics line per update and call save(state) every args.save_every updates and at the end."""
    params = list(model.parameters())
    if name == "es":
        master = resume["master"] if resume else master_weights(params)
        batch = args.es_prompts
    else:
        reference = copy.deepcopy(model).eval().requires_grad_(False) if args.grpo_beta else None
        if args.grpo_fsdp and WORLD_SIZE > 1:
            trainer = shard(copy.deepcopy(model))
            if reference is not None:
                shard(reference)
            held = sum(p.to_local().numel() for p in trainer.parameters()) / sum(p.numel() for p in params)
            log(f"grpo: FSDP over {WORLD_SIZE} ranks, this rank holds {held:.0%} of the trained weights "
                f"and AdamW states")
        elif WORLD_SIZE > 1:
            trainer = DistributedDataParallel(model, device_ids=[model.device.index] if model.device.type == "cuda"
                                              else None, broadcast_buffers=False)
        else:
            trainer = model
            if args.grpo_fsdp:
                log("grpo: --grpo-fsdp shards over torchrun ranks; on one process it changes nothing")
        optimizer = torch.optim.AdamW(trainer.parameters(), lr=args.grpo_lr, weight_decay=0.0)
        if resume:
            whole = StateDictOptions(full_state_dict=True)  # every rank read the checkpoint; FSDP keeps its shards
            set_optimizer_state_dict(trainer, optimizer, resume["optimizer"], options=whole)
            if reference is not None:
                set_model_state_dict(reference, resume["reference"], options=whole)
        batch = args.grpo_prompts
    rng = random.Random(f"{args.seed}-{name}-{offset}")
    if resume:
        rng.setstate(resume["rng"])
    totals = resume["totals"] if resume else {"sequences": 0, "tokens": 0, "seconds": 0.0}
    first = resume["update"] if resume else 0
    for update in tqdm(range(first, updates), desc=name, initial=first, total=updates, disable=not IS_MAIN_RANK, leave=False):
        tick = time.time()
        problems = rng.sample(train, min(batch, len(train)))
        step_seed = args.seed * 1_000_003 + offset + update
        if name == "es":
            stats = es_step(model, params, master, tokenizer, problems, args, step_seed, generate)
        else:
            stats = grpo_step(model, reference, optimizer, tokenizer, problems, args, step_seed, generate, trainer)
        if not (math.isfinite(stats.get("loss", 0.0)) and all(torch.isfinite(p).all() for p in params)):
            raise SystemExit(f"update {offset + update + 1} ({name}): non-finite loss or weights; stopped, "
                             f"the last good checkpoint is kept in {args.out}")
        if update + 1 == updates or (args.check_every and (update + 1) % args.check_every == 0):
            check_same_weights(params, f"update {offset + update + 1} ({name})")
        seconds = time.time() - tick
        totals = {"sequences": totals["sequences"] + stats["sequences"], "tokens": totals["tokens"] + stats["tokens"],
                  "seconds": totals["seconds"] + seconds}
        line = {"update": offset + update + 1, "stage": name, **stats, "seconds": round(seconds, 3),
                "seq_per_s": round(stats["sequences"] / seconds, 1), "sequences": totals["sequences"],
                "tokens": totals["tokens"]}
        metrics.write(json.dumps(line) + "\n")
        metrics.flush()
        extra = f"js {stats['js_succ']:.3f}" if name == "es" else f"kl {stats['kl']:.4f}"
        log(f"{name} {update + 1}/{updates} reward {stats['reward']:.3f} ent {stats['entropy']:.3f} {extra} "
            f"{seconds:.2f}s {line['seq_per_s']:.0f} seq/s")
        if update + 1 == updates or (args.save_every and (update + 1) % args.save_every == 0):
            save({"update": update + 1, "totals": totals, "rng": rng.getstate(),
                  "master": master if name == "es" else None,
                  # whole tensors keyed by name, gathered by every rank (FSDP): any number of ranks can resume
                  "optimizer": (get_optimizer_state_dict(trainer, optimizer, options=WHOLE_STATE)
                                if name == "grpo" else None),
                  "reference": (get_model_state_dict(reference, options=WHOLE_STATE)
                                if name == "grpo" and reference is not None else None)})
    return totals


def evaluation_sets(args: Args, tokenizer):
    """(train, eval, held-out families): never overlapping; the built-in eval set is fixed across seeds."""
    if args.data:
        train = load_problems(args.data, args.task)
        if args.eval_data:
            evaluation = load_problems(args.eval_data, args.task)
        else:  # hold out the file's last problems
            if len(train) < 2:
                raise SystemExit(f"{args.data}: needs at least 2 problems to hold some out (or give --eval-data)")
            cut = max(1, min(args.eval_problems, len(train) // 5))
            train, evaluation = train[:-cut], train[-cut:]
    else:
        evaluation = evaluation_pool("countdown", args.eval_split)
        train = generate_problems("countdown", 5000, seed=args.seed, exclude=never_trained_on())
    trained = train[0]["task"]
    heldout = {task: evaluation_pool(task, args.eval_split)[:args.heldout_problems]
               for task in ("countdown", "add", "sort") if task != trained}
    if tokenizer.chat_template is None and trained == "math":
        heldout = {}
    return train, evaluation[:args.eval_problems], heldout


def measure(name: str, model, tokenizer, evaluation, heldout, args: Args, cost: dict, generate=rollout) -> dict:
    result = evaluate(model, tokenizer, evaluation, args, seed=args.seed, generate=generate)
    for task, problems in heldout.items():
        result[f"heldout_{task}"] = evaluate(model, tokenizer, problems, args, seed=args.seed, generate=generate)
    k = max(k for k in PASS_KS if k <= args.eval_samples)
    result[f"heldout_pass@{k}"] = (float(np.mean([result[f"heldout_{t}"][f"pass@{k}"] for t in heldout]))
                                   if heldout else None)
    return {"name": name, **result, **cost}


def print_table(stages: list[dict]):
    columns = ["pass@1", "pass@16", "pass@64", "maj@16", "entropy", "heldout_pass@64", "sequences", "tokens", "seconds"]
    log("| stage | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 1))
    for row in stages:
        cells = [row.get(c) for c in columns]
        log(f"| {row['name']} | " + " | ".join("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                                              for v in cells) + " |")


def atomic_write(path: Path, write):
    """Write through a temporary name and rename, so a crash never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def prepare_run_folder(args: Args) -> tuple[Args, dict | None]:
    """A new run folder, or with --resume the saved config and last checkpoint of an interrupted run."""
    if args.resume:
        folder = Path(args.resume)
        try:
            saved = json.loads((folder / "config.json").read_text())
            checkpoint = torch.load(folder / "checkpoint.pt", weights_only=False) if (folder / "checkpoint.pt").exists() else None
        except (OSError, ValueError, RuntimeError) as err:
            raise SystemExit(f"--resume {folder}: not a resumable run folder ({err.__class__.__name__})")
        return Args(**{**saved, "resume": str(folder), "out": str(folder)}), checkpoint
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise SystemExit(f"--out {out}: run folder exists; pass --resume {out} to continue it or --overwrite to replace it")
    barrier()  # every rank has looked before the main rank writes
    if IS_MAIN_RANK:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        atomic_write(out / "config.json", lambda tmp: tmp.write_text(json.dumps(dataclasses.asdict(args), indent=2)))
    barrier()
    return args, None


def run(args: Args, generate=rollout) -> dict:
    """Evaluate the base model, train each stage of the schedule, evaluate and save after each.

    A checkpoint (weights, optimizer or ES master, RNG state, evaluations so far) is replaced atomically
    every --save-every updates and after each stage; --resume continues bit-exactly from it. Under torchrun
    only the main rank writes files. generate: rollout, or any function with its signature (scale/: vLLM)."""
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    device = init_distributed(device, args.dist_timeout)
    args, checkpoint = prepare_run_folder(args)
    out = Path(args.out)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    model, tokenizer = load_model(args.model, device, args.dtype)
    model.eval()
    train, evaluation, heldout = evaluation_sets(args, tokenizer)
    log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {len(train)} training / "
        f"{len(evaluation)} eval problems, held out: {', '.join(heldout) or 'none'}; algo {args.algo}, {args.steps} updates")
    schedule = stages_of(args.algo, args.steps)
    if args.resume:  # drop the metrics of updates after the checkpoint (all of them if it was never written)
        done = 0
        if checkpoint:
            done = sum(u for _, u in schedule[:checkpoint["stage"]]) + (checkpoint["stage_state"] or {}).get("update", 0)
        if IS_MAIN_RANK:  # the only rank that writes metrics
            lines = (out / "metrics.jsonl").read_text().splitlines() if (out / "metrics.jsonl").exists() else []
            kept = [line for line in lines if line.strip() and json.loads(line)["update"] <= done]
            atomic_write(out / "metrics.jsonl", lambda tmp: tmp.write_text("".join(line + "\n" for line in kept)))
        log(f"resuming {out} after update {done}")
    if checkpoint:
        model.load_state_dict(checkpoint["model"])
        stages = checkpoint["stages"]
    else:
        stages = [measure("base", model, tokenizer, evaluation, heldout, args,
                          {"sequences": 0, "tokens": 0, "seconds": 0.0}, generate)]

    def save(stage: int, stage_state: dict | None):
        if not IS_MAIN_RANK:  # the ranks hold the same weights (check_same_weights): one writes them
            return
        state = {"model": model.state_dict(), "stage": stage, "stage_state": stage_state, "stages": stages,
                 "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}
        atomic_write(out / "checkpoint.pt", lambda tmp: torch.save(state, tmp))

    first_stage = checkpoint["stage"] if checkpoint else 0
    with open(out / "metrics.jsonl" if IS_MAIN_RANK else os.devnull, "a") as metrics:
        for index, (name, updates) in enumerate(schedule):
            if index < first_stage:
                continue
            resume = checkpoint["stage_state"] if checkpoint and index == first_stage else None
            offset = sum(u for _, u in schedule[:index])
            cost = train_stage(name, updates, model, tokenizer, train, args, metrics, offset, resume,
                               lambda stage_state: save(index, stage_state), generate)
            gc.collect()  # a sharded stage's FSDP modules sit in reference cycles: free their shards now, and
            # before the process group goes (gloo can abort the exit if they outlive it)
            if IS_MAIN_RANK:
                model.save_pretrained(out / f"stage{index + 1}-{name}")
                tokenizer.save_pretrained(out / f"stage{index + 1}-{name}")
            stages.append(measure(name, model, tokenizer, evaluation, heldout, args, cost, generate))
            save(index + 1, None)
            log(f"{name}: pass@1 {stages[-1]['pass@1']:.3f}, {cost['seconds']:.0f}s")
    summary = {"algo": args.algo, "seed": args.seed, "world_size": WORLD_SIZE, "stages": stages}
    if IS_MAIN_RANK:
        atomic_write(out / "summary.json", lambda tmp: tmp.write_text(json.dumps(summary, indent=2)))
    print_table(stages)
    if dist.is_initialized():
        dist.destroy_process_group()
    return summary


# ----------------------------------------------------------------------------- pretraining (builds tiny_model/)


@dataclass
class PretrainArgs:
    """Supervised pretraining of the shipped tiny model on the synthetic task families."""

    out: str = flag(str(TINY_MODEL), "folder to write the model and tokenizer to")
    seed: int = flag(0, "seed")
    steps: int = flag(800, "optimizer steps")
    batch: int = flag(256, "sequences per step")
    lr: float = flag(3e-3, "peak AdamW learning rate (cosine decay)")
    countdown_share: float = flag(0.6, "share of Countdown examples (the rest: add and sort)")


def pretrain(p: PretrainArgs):
    torch.manual_seed(p.seed)
    model, tokenizer = build_tiny_model(p.seed)
    rng = random.Random(p.seed)
    excluded = never_trained_on()
    optimizer = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / p.steps)))
    bar = tqdm(range(p.steps), desc="pretrain")
    for _ in bar:
        problems = []
        while len(problems) < p.batch:
            task = "countdown" if rng.random() < p.countdown_share else rng.choice(["add", "sort"])
            problem = make_problem(task, rng)
            if problem_key(problem) not in excluded:  # never train on the evaluation problems
                problems.append(problem)
        prompts = tokenizer([prompt_text(x, tokenizer) for x in problems], padding=True, return_tensors="pt")
        tokenizer.padding_side = "right"
        targets = [x.get("solution", x.get("answer")) + tokenizer.eos_token for x in problems]
        completions = tokenizer(targets, padding=True, return_tensors="pt")
        tokenizer.padding_side = "left"
        roll = Rollout([], prompts["input_ids"], prompts["attention_mask"], completions["input_ids"],
                       completions["attention_mask"], None, None)
        logp, _ = token_logprobs(model, roll)
        loss = -masked_mean(logp, roll.completion_mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.save_pretrained(p.out)
    tokenizer.save_pretrained(p.out)
    record = {"command": " ".join(["python es_grpo.py pretrain", *sys.argv[2:]]), **dataclasses.asdict(p),
              "final_loss": round(loss.item(), 4), "torch": torch.__version__}
    record["out"] = Path(p.out).name
    Path(p.out, "pretrain.json").write_text(json.dumps(record, indent=2))
    log(f"saved {p.out}: loss {loss.item():.3f}")


# ----------------------------------------------------------------------------- main

if __name__ == "__main__":
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    if sys.argv[1:2] == ["pretrain"]:
        pretrain(PretrainArgs(**vars(dataclass_parser(PretrainArgs, "es_grpo.py pretrain").parse_args(sys.argv[2:]))))
    else:
        run(parse_args())
