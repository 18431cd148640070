"""Evolution strategies (ES) and GRPO for LLM reasoning, end to end, in one file.

Implements "Understanding Evolution Strategies for LLM Reasoning: Broader Reasoning Coverage
than GRPO" (arXiv 2608.27351; its settings and equations are restated where they are used):
verifier rewards, the unbiased Pass@K estimator, the GRPO and ES updates and the sequential
GRPO->ES schedule.

    python es_grpo.py                        # CPU, no network: GRPO then ES on the tiny model
    python es_grpo.py --algo es --steps 100 --seed 1 --out runs/es-s1
    python -m scale.train --algo es --steps 100 --out runs/es-s1   # the same, resumable, faster
    python es_grpo.py --model models/SmolLM2-135M-Instruct --task add   # from scale/real_model.py
    torchrun --nproc_per_node=8 -m scale.train ...   # many GPUs: these functions, through hooks

Sections follow the paper (config, model, task and verifier, rollout, Pass@K, GRPO, ES, schedule,
run; math-verify's time bound last). The ideas, in reading order: rollout, pass_at_k, grpo_loss,
grpo_step, set_weights, es_update, es_step, train_schedule, run. A first reading may skip the flag
checks (checked), load errors (load_model), the LaTeX path (math_grade, latex_compare) and the hook
defaults (OneProcess, RunFolder, Context), which scale/assembly.py fills, each tested to agree.

Deliberate departures from the paper (the tiny defaults unless marked; scale.train's --preset
paper restores the paper's settings):
 1. Model and task: a 0.86M-parameter character-level Llama pretrained on synthetic Countdown,
    not Qwen or Llama on GSM8K; held out: digit addition and sorting, also pretrained
    (tiny_model/tasks.py, tiny_model/pretrain.py).
 2. ES: sigma 1e-2 and alpha 2e-3 (paper: 1.5e-3, 2.5e-4), tuned on dev for a model 2000x
    smaller; N=32, 64 prompts, greedy as in the paper. Sampled ES decoding gives every member
    the same noise (common random numbers).
 3. GRPO: learning rate 5e-5 (paper: 1e-6), 32 prompts per step; the loss averages over all
    completion tokens of the batch (token-level, TRL's default), not per sequence first.
 4. Always: ES sets each member to master + sigma * eps from an fp32 master copy on the CPU,
    not by adding and subtracting noise in place: restores are bit-exact, updates sum in fp32.
 5. Always: Pass@K uses 64 samples per problem (the paper: 32), so Pass@64 can be shown.
"""
from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import gc
import inspect
import itertools
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
import transformers
from huggingface_hub.utils import enable_progress_bars
from safetensors import SafetensorError
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from tiny_model.tasks import (ARITHMETIC, EVAL_POOL, HELDOUT, SPLIT_SEEDS,  # built-in tasks' data
                              evaluation_pool, generate_problems, never_trained_on)  # (departure 1)

TINY_MODEL = Path(inspect.getfile(generate_problems)).resolve().parent  # a copy of this file too
log = tqdm.write  # prints above a progress bar instead of through it

# ----------------------------------------------------------------------------- config

class BadInput(SystemExit):
    """A data file, model, flag or run folder that cannot be used: one line naming it on stderr,
    said when raised (so every entry point says it), and exit status 2 as for a bad flag."""
    def __init__(self, message: str):
        super().__init__(2)
        self.message = message
        print(f"error: {message}", file=sys.stderr, flush=True)

    def __str__(self) -> str:
        return self.message

def flag(default, help, choices=None, least=None):  # least: the smallest value allowed
    return field(default=default, metadata={"help": help, "choices": choices, "least": least})

SCHEDULES, DTYPES = ("es", "grpo", "grpo-es", "es-grpo"), ("float32", "bfloat16", "float16")
TASKS = ("auto", *HELDOUT)  # built-in tasks: two-digit sums (add) for chat models (README)
PASS_KS, MAJ_K = (1, 16, 64), 16

@dataclass
class Args:
    """Every hyperparameter of a run; each field is a command-line flag."""
    model: str = flag("", "model folder or hub id (empty: the shipped tiny model)")
    algo: str = flag("grpo-es", "schedule: ES, GRPO, or both in turn", SCHEDULES)
    task: str = flag("auto", "built-in task (auto: countdown; add, for chat models)", TASKS)
    steps: int = flag(200, "total updates; two-stage schedules split them evenly", least=1)
    out: str = flag("", "run folder (empty: runs/ALGO-sSEED)")
    seed: int = flag(0, "seed of everything random")
    device: str = flag("auto", "cpu, cuda, ... (auto: cuda if available)")
    dtype: str = flag("float32", "weights dtype (ES's update stays fp32)", DTYPES)
    max_new_tokens: int = flag(12, "longest completion, in tokens", least=1)
    rollout_batch: int = flag(2048, "most rows decoded at once (here: evaluation)", least=1)
    # ES (paper: N=32, sigma 1.5e-3, alpha 2.5e-4, 64 prompts, greedy)
    es_population: int = flag(32, "ES population size N", least=2)
    es_sigma: float = flag(1e-2, "ES noise scale sigma")
    es_alpha: float = flag(2e-3, "ES step size alpha (1/sigma folded in)", least=0)
    es_prompts: int = flag(64, "prompts each ES member is scored on, per iteration", least=1)
    es_temperature: float = flag(0.0, "ES decoding temperature (0: greedy, as the paper)", least=0)
    es_zscore: bool = flag(True, "z-score rewards across the population")
    es_antithetic: bool = flag(False, "mirrored sampling: N/2 seeds, each used with +eps and -eps")
    es_null: bool = flag(False, "control: rewards shuffled across members (no signal)")
    # GRPO (paper: 8 samples/prompt, lr 1e-6, temperature 1.0, clip 0.2, beta 0.001)
    grpo_prompts: int = flag(32, "prompts per GRPO step", least=1)
    grpo_group: int = flag(8, "samples per prompt (the group)", least=2)
    grpo_lr: float = flag(5e-5, "AdamW learning rate", least=0)
    grpo_temperature: float = flag(1.0, "GRPO sampling temperature")
    grpo_clip: float = flag(0.2, "PPO clip range epsilon")
    grpo_beta: float = flag(1e-3, "k3 KL coefficient to the starting model")
    grpo_scale_std: bool = flag(True, "divide group advantages by the group std")
    # evaluation (paper: temperature 0.6)
    eval_problems: int = flag(100, "held-out evaluation problems", least=1)
    eval_split: str = flag("test", "built-in eval set: test or dev (tune on)", tuple(SPLIT_SEEDS))
    heldout_problems: int = flag(50, "problems per held-out task family (forgetting)", least=1)
    eval_samples: int = flag(64, "samples per problem for Pass@K and Maj@16", least=MAJ_K)
    eval_temperature: float = flag(0.6, "evaluation sampling temperature", least=0)
    eval_top_p: float = flag(1.0, "evaluation nucleus (top-p) sampling")
    eval_every: int = flag(0, "updates between trajectory points (Pass@K, metrics.jsonl)", least=0)
    trajectory_samples: int = flag(32, "samples per problem at each trajectory point", least=1)

    def sampling(self, use: str, seed: int) -> Sampling:
        """How "es", "grpo" or "eval" decodes, its noise seeded by seed."""
        temperature = {"es": self.es_temperature, "grpo": self.grpo_temperature,
                       "eval": self.eval_temperature}[use]
        top_p = self.eval_top_p if use == "eval" else 1.0
        return Sampling(temperature, top_p, self.max_new_tokens, seed, self.rollout_batch)

    def fitness(self, rewards: torch.Tensor) -> torch.Tensor:  # ES's weights z_n, (N,)
        centred = (rewards - rewards.mean()) * (rewards.max() > rewards.min())  # 0 if all equal
        return zscore(rewards) if self.es_zscore else centred

TABLE_COLUMNS = ("pass@1 pass@16 pass@64 maj@16 entropy heldout_pass@64 sequences tokens "
                 "seconds").split()

class OneLineErrors(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

def dataclass_parser(cls, prog=None, description=None, only=None, **kwargs):
    """A flag per field of the dataclass (or per field named in `only`), with the field's help."""
    parser = OneLineErrors(prog=prog, description=description or cls.__doc__, **kwargs)
    for f in dataclasses.fields(cls):
        if only is None or f.name in only:
            kind = {"int": int, "float": float, "str": str}.get(f.type)
            parser.add_argument("--" + f.name.replace("_", "-"), default=f.default,
                                help=f.metadata["help"], choices=f.metadata.get("choices"),
                                **({"type": kind} if kind else
                                   {"action": argparse.BooleanOptionalAction}))
    return parser

def parse_args(argv=None) -> Args:
    parser = dataclass_parser(Args)
    return checked(parser, Args(**vars(parser.parse_args(argv))))

def checked(parser, a: Args) -> Args:
    """a with --out's default, every flag in range; else one line naming the first that is not."""
    for f in dataclasses.fields(a):
        if f.metadata.get("least") is not None and getattr(a, f.name) < f.metadata["least"]:
            parser.error(f"--{f.name.replace('_', '-')} must be at least {f.metadata['least']}")
    for bad, message in [
        (a.algo in ("grpo-es", "es-grpo") and a.steps < 2,
         "--steps must be at least 2 for two stages"),
        (a.es_sigma <= 0 or a.grpo_temperature <= 0,
         "--es-sigma and --grpo-temperature (it divides the logits) must be positive"),
        (a.es_antithetic and a.es_population % 2 == 1,
         "--es-antithetic needs an even --es-population"),
        (a.heldout_problems > EVAL_POOL, f"--heldout-problems: the built-in sets have {EVAL_POOL}"),
        (not 0 < a.eval_top_p <= 1, "--eval-top-p must be in (0, 1]")]:
        if bad:
            parser.error(message)
    a.out = a.out or f"runs/{a.algo}-s{a.seed}"
    return a

# ----------------------------------------------------------------------------- model

def load_model(name: str = "", device: str = "cpu", dtype: str = "float32"):
    """Any causal LM and its tokenizer, from a folder or a hub id ("": the shipped tiny model)."""
    name = name or str(TINY_MODEL)
    hub_id = re.fullmatch(r"[\w.-]+/[\w.-]+", name) and not name.startswith(".")
    if not Path(name).exists() and not hub_id:
        raise BadInput(f"--model {name}: no such folder (and not a hub id like org/name)")
    if Path(name).exists() and not (Path(name) / "config.json").exists():
        raise BadInput(f"--model {name}: folder has no config.json (not a transformers model)")
    transformers.logging.set_verbosity_error()  # its warnings and bars drown our lines;
    transformers.logging.disable_progress_bar()  # a download's bars stay
    enable_progress_bars()
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=getattr(torch, dtype))
    except (OSError, ValueError, KeyError, ImportError, SafetensorError) as err:
        # ImportError: a missing tokenizer library; SafetensorError: a truncated weights file
        reason = next(iter(str(err).strip().splitlines()), err.__class__.__name__)
        raise BadInput(f"--model {name}: cannot load a causal LM ({reason})") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:  # many chat models ship without one
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    try:
        return model.to(device), tokenizer
    except (RuntimeError, AssertionError) as err:  # no such device here (no CUDA, a bad index)
        raise BadInput(f"--device {device}: not usable here ({str(err).splitlines()[0]})") from None

def eos_ids(model, tokenizer) -> list[int]:  # where a completion ends: chat models add end of turn
    listed = getattr(getattr(model, "generation_config", None), "eos_token_id", None)  # int, list
    return sorted({*(listed if isinstance(listed, list) else [listed]),
                   tokenizer.eos_token_id} - {None})

# ----------------------------------------------------------------------------- task and verifier
# Rewards as in the paper: 1.0 correct, 0.1 a wrong final answer, 0 none. Model text is parsed,
# never run: arithmetic by Python's ast over a whitelist of nodes, bounded in length and nesting;
# LaTeX by math-verify (TRL's, open-r1's checker) within MATH_SECONDS. scale/verifier.py: prose.

MAX_EXPR_CHARS, MAX_DEPTH, MAX_NUMBER_CHARS = 256, 32, 64
MAX_BITS = 4096  # of a power's result
MAX_ANSWER_CHARS, MATH_SECONDS = 512, 2  # a math answer math-verify reads; whole seconds a call
EXPRESSION = re.compile(r"[\s0-9+\-*/()]*")  # countdown's alphabet
PLAIN_MATH = re.compile(r"[\s0-9.+\-*/^()]*")  # a plain math answer's: decimals, signs, powers too
LONG_NUMBER = re.compile(f"[0-9.]{{{MAX_NUMBER_CHARS + 1},}}")
LEADING_ZEROS = re.compile(r"(?<![0-9.])0+(?=[0-9])")  # 007 is 7 (Python's ast refuses it)
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
NUMBER = re.compile(r"-?[0-9]*\.?[0-9]+")
OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
MATH_OPERATORS = OPERATORS | {ast.Pow: "^"}

def parse_expression(text: str, plain_math: bool = False):
    """(value, literals) of an arithmetic expression of integers, + - * / and parentheses; None if
    malformed; value is a Fraction, or None where undefined (division by zero). plain_math: a math
    answer, which may also have decimals, signs, ^ and implicit products, 2(3)."""
    text = text.strip()[:MAX_EXPR_CHARS + 1]
    depth = max(itertools.accumulate({"(": 1, ")": -1}.get(c, 0) for c in text), default=0)
    if (not text or len(text) > MAX_EXPR_CHARS or depth > MAX_DEPTH or LONG_NUMBER.search(text)
            or not (PLAIN_MATH if plain_math else EXPRESSION).fullmatch(text)):
        return None
    source = LEADING_ZEROS.sub("", " ".join(text.replace("^", "**").split()))
    literals, operators = [], MATH_OPERATORS if plain_math else OPERATORS
    def value(node):  # only these nodes have a value; any other refuses the text
        if isinstance(node, ast.Constant) and type(node.value) in (int, float)[:1 + plain_math]:
            literals.append(Fraction(ast.get_source_segment(source, node)))  # exact: 0.1 is 1/10
            return literals[-1]
        if isinstance(node, ast.BinOp) and type(node.op) in operators:
            return arithmetic(operators[type(node.op)], value(node.left), value(node.right))
        if plain_math and isinstance(node, ast.UnaryOp) and type(node.op) in (ast.UAdd, ast.USub):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) and inner is not None else inner
        if plain_math and isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            return arithmetic("*", value(node.func), value(node.args[0]))  # 2(3): a product
        raise ValueError(f"not arithmetic: {type(node).__name__}")
    try:
        return value(ast.parse(source, mode="eval").body), literals
    except (SyntaxError, ValueError):
        return None

def arithmetic(op: str, a: Fraction | None, b: Fraction | None) -> Fraction | None:
    """a op b, exact; None where undefined, or for a power not whole or too large (MAX_BITS)."""
    if a is None or b is None or (op == "/" and b == 0):
        return None
    if op != "^":
        return ARITHMETIC[op](a, b)
    bits = max(a.numerator.bit_length(), a.denominator.bit_length()) * abs(b.numerator)
    return None if b.denominator != 1 or bits > MAX_BITS or (a == 0 and b < 0) else a ** b.numerator

def countdown_answer(completion: str) -> str:
    """The last <answer>...</answer> near the end of a completion if any, else its first line."""
    tagged = ANSWER_TAG.findall(completion[-4 * MAX_EXPR_CHARS:])
    return tagged[-1] if tagged else completion.strip().split("\n", 1)[0]

def countdown_reward(completion: str, numbers: list[int], target: int) -> float:
    """1.0 if the answer uses every number once and equals target; 0.1 if well-formed; else 0."""
    parsed = parse_expression(countdown_answer(completion))
    if parsed is None:
        return 0.0
    value, literals = parsed
    right = sorted(literals) == sorted(numbers) and value is not None and value == target
    return 1.0 if right else 0.1

def box_at(text: str, start: int) -> tuple[str, int]:
    """(content, end) of the \\boxed{...} at start; ("", -1) unless it closes within
    MAX_ANSWER_CHARS."""
    depth, end = 1, start + len("\\boxed{")
    stop = min(len(text), end + MAX_ANSWER_CHARS)
    while end < stop and depth:
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        end += 1
    return (text[start + len("\\boxed{"):end - 1].strip(), end) if depth == 0 else ("", -1)

def boxed(text: str) -> str | None:  # the last \boxed{...}'s content; None if there is none
    start = text.rfind("\\boxed{")
    return None if start < 0 else box_at(text, start)[0]

def plain_number(text: str) -> str:
    """text's last number if it is a word of its own (sentence marks, $ and * around it allowed),
    outside LaTeX math and not left of an '='; "" if it sits in LaTeX (a fraction, root, interval,
    power, $...$ or \\(...\\)) or an equation: declined, never read from inside."""
    found = list(NUMBER.finditer(text))
    start, end = found[-1].span() if found else (0, 0)
    before = re.split(r"[\s=]", text[:start])[-1]  # the number's word, up to it (linear time)
    outside = text[:start - len(before)]
    opener = max(outside.rfind("\\("), outside.rfind("\\["))  # is the last \( or \[ still open?
    math = outside.count("$") % 2 or opener >= 0 and not re.search(r"\\[)\]]", outside[opener:])
    alone = re.fullmatch(r"[$*]*", before) and re.match(r"[.,;:!?*$]*(\s|$)", text[end:])
    return found[-1][0] if found and alone and not math and "=" not in text[end:] else ""

def math_grade(completion: str, answer: str) -> tuple[float, str]:
    """(reward, Maj@K key) of a math completion. Its final answer, the last \\boxed{...} or else the
    last number, against the reference's (after a GSM8K solution's "####"): plain numbers by value,
    the rest by math-verify (latex_compare): \\frac12 = 0.5. scale/verifier.py's reads prose too."""
    reference, mine = answer.rsplit("####", 1)[-1].strip(), boxed(completion)
    bare = not mine  # an empty \boxed{} is no answer: the plain one then
    if bare:
        mine = plain_number(completion[-MAX_ANSWER_CHARS:])
    if not mine:
        return 0.0, ""
    ours, theirs = (parse_expression(text, plain_math=True) for text in (mine, reference))
    if ours and theirs and ours[0] is not None:
        return (1.0 if ours[0] == theirs[0] else 0.1), str(ours[0])
    if bare and not ours:  # a number past the parser's bounds
        return 0.1, mine
    found, equal, key = latex_compare(reference, f"${mine}$")
    return (1.0 if equal else 0.1), key or "".join(mine.split())

def grade(problem: dict, completion: str) -> tuple[float, str]:
    """(reward, what Maj@K votes on): the expression for Countdown, the parsed answer for math.
    Context's grade hook (scale/verifier.py's grade: prose too, bounded in any thread)."""
    if problem["task"] == "countdown":
        reward = countdown_reward(completion, problem["numbers"], problem["target"])
        return reward, re.sub(r"\s", "", countdown_answer(completion))
    return math_grade(completion, problem["answer"])

CHAT_PROMPTS = {
    "countdown": "Using the numbers {numbers}, each exactly once, with + - * / and parentheses, "
                 "write an expression equal to {target}. Give only the expression inside "
                 "<answer></answer>.",
    "sort": "Sort the digits {question} in ascending order. Put the result in \\boxed{{}}.",
    "add": "What is {question}? Put the final answer in \\boxed{{}}.",
    "math": "{question}\nPut the final answer in \\boxed{{}}."}

def prompt_text(problem: dict, tokenizer) -> str:
    """The prompt: a compact one for the character-level model, a chat turn for chat models."""
    task = problem["task"]
    if tokenizer.chat_template is None:  # the tiny model's pretraining format
        if task == "countdown":
            return "C" + ",".join(map(str, problem["numbers"])) + f"={problem['target']}:"
        return {"add": "A", "sort": "S"}.get(task, "") + problem["question"] + ":"
    content = CHAT_PROMPTS.get(task, CHAT_PROMPTS["math"]).format(**problem)
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True)

def evaluation_sets(args: Args, tokenizer):
    """(train, eval, held-out families) of the built-in task: never overlapping; the eval set is
    fixed across seeds. run()'s `problems` hook (scale/config.py: data files)."""
    if args.eval_problems > EVAL_POOL:
        raise BadInput(f"--eval-problems {args.eval_problems}: the built-in set has {EVAL_POOL}")
    task = args.task if args.task != "auto" else "add" if tokenizer.chat_template else "countdown"
    evaluation = evaluation_pool(task, args.eval_split)[:args.eval_problems]
    train = generate_problems(task, 5000, seed=args.seed, exclude=never_trained_on())
    heldout = {family: evaluation_pool(family, args.eval_split)[:args.heldout_problems]
               for family in HELDOUT[task]}
    return train, evaluation, heldout

# ----------------------------------------------------------------------------- rollout

@dataclass(frozen=True)
class Sampling:
    """How completions are decoded (Args.sampling builds one per use)."""
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    max_new_tokens: int = 12
    seed: int = 0  # of the generator the rows of a call share
    batch_size: int = 2048  # most rows decoded at once: scale/'s chunks (a call here decodes all)

@dataclass
class Rollout:
    """Completions of a batch of prompts: (B, P) tensors of the prompt, (B, T) of the completion."""
    texts: list[str]
    prompt_ids: torch.Tensor  # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    completion_ids: torch.Tensor  # (B, T) right-padded, EOS included
    completion_mask: torch.Tensor  # (B, T)
    logprobs: torch.Tensor  # (B, T) of each sampled token under the model at temperature 1
    entropy: torch.Tensor  # (B, T) the model's full-vocabulary entropy at temperature 1
    @property
    def tokens(self) -> int: return int(self.completion_mask.sum())
    def rows(self, index: slice) -> Rollout:
        return Rollout(*(value[index] for value in vars(self).values()))  # every field, in order

def cache_argument(model) -> str:  # transformers 5 models take `cache` or `past_key_values`
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

def sample_tokens(logits, temperature, top_p, uniform):
    """Inverse-CDF sampling in vocabulary order (greedy at temperature 0); logits (B, V), uniform
    (B,)."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, -1)  # (B, V)
    if top_p < 1:
        sorted_probs, order = probs.sort(-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p  # (B, V) outside the nucleus
        probs = probs.masked_fill(outside.scatter(-1, order, outside), 0.0)
    cdf = probs.cumsum(-1)  # (B, V)
    choice = torch.searchsorted(cdf, (uniform * cdf[:, -1]).unsqueeze(-1)).squeeze(-1)  # (B,)
    return choice.clamp(max=logits.shape[-1] - 1)

@torch.no_grad()
def rollout(model, tokenizer, prompts: list[str], sampling: Sampling = Sampling(),
            first_row: int = 0, total_rows: int | None = None) -> Rollout:
    """Sample completions with a KV cache until EOS (greedy by default). prompts: rows first_row..
    of total_rows, sharing a generator seeded by sampling.seed: a row's noise is the same on any
    process and for every ES member. The generate hook's contract (scale/: decode.py, vLLM)."""
    drawn = slice(first_row, first_row + len(prompts))  # these rows' draws
    device = next(model.parameters()).device
    encoded = tokenizer(prompts, padding=True, return_tensors="pt",
                        add_special_tokens=tokenizer.chat_template is None).to(device)
    generator = torch.Generator().manual_seed(sampling.seed)
    uniform = lambda: torch.rand(total_rows or drawn.stop, generator=generator)[drawn].to(device)
    stops = torch.tensor(eos_ids(model, tokenizer), device=device)
    steps = token_steps(model, encoded, sampling, uniform, stops, tokenizer.pad_token_id)
    tokens, alive, logprobs, entropy = (torch.stack(column, 1) for column in zip(*steps))  # (B, T)
    mask = alive.long()  # (B, T)
    texts = tokenizer.batch_decode(tokens.masked_fill(mask == 0, tokenizer.pad_token_id),
                                   skip_special_tokens=True)
    return Rollout(texts, encoded["input_ids"], encoded["attention_mask"], tokens, mask,
                   logprobs * mask, entropy * mask)

def token_steps(model, encoded, sampling: Sampling, uniform: Callable, stops, pad_id: int):
    """(token, alive, log-prob, entropy), each (B,), a step at a time, until every row has sampled
    a stop token or max_new_tokens are out; a row that has ended gets pad_id."""
    inputs, mask = encoded["input_ids"], encoded["attention_mask"]  # (B, P) each
    cache = {cache_argument(model): DynamicCache(config=model.config)}
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P)
    done = torch.zeros(inputs.shape[0], dtype=torch.bool, device=inputs.device)  # (B,)
    for _ in range(sampling.max_new_tokens):
        logits = model(input_ids=inputs, attention_mask=mask, position_ids=positions,
                       use_cache=True, **cache).logits[:, -1].float()  # (B, V)
        logp = logits.log_softmax(-1)  # (B, V)
        token = sample_tokens(logits, sampling.temperature, sampling.top_p, uniform())  # (B,)
        token = token.masked_fill(done, pad_id)
        entropy = -(logp.exp() * logp).sum(-1)  # (B,)
        yield token, ~done, logp.gather(-1, token[:, None]).squeeze(-1), entropy
        done = done | torch.isin(token, stops)
        if done.all():
            return
        inputs = token[:, None]  # (B, 1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)  # (B, P + steps)
        positions = positions[:, -1:] + 1  # (B, 1)

def token_logprobs(model, roll: Rollout, temperature: float = 1.0, logits=None):
    """Log-prob of each completion token at temperature, and the model's entropy (temperature 1):
    (B, T) each, from logits (B, T, V) predicting each (default: one forward pass of model)."""
    if logits is None:
        ids = torch.cat([roll.prompt_ids, roll.completion_ids], 1)  # (B, P+T)
        mask = torch.cat([roll.prompt_mask, roll.completion_mask], 1)  # (B, P+T)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+T)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        logits = logits[:, roll.prompt_ids.shape[1] - 1:-1].float()  # (B, T, V)
    logp_all = logits.log_softmax(-1)  # (B, T, V)
    entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, T)
    if temperature != 1.0:
        logp_all = (logits / temperature).log_softmax(-1)  # (B, T, V)
    chosen = logp_all.gather(-1, roll.completion_ids.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return chosen, entropy

def masked_mean(values: torch.Tensor, mask: torch.Tensor, count=None) -> torch.Tensor:
    return (values * mask).sum() / (mask.sum().clamp(min=1) if count is None else count)

def score(run: Context, problems: list[dict], texts: list[str]) -> torch.Tensor:  # (B,) run.grade
    return torch.tensor([run.grade(p, t)[0] for p, t in zip(problems, texts)])

# ----------------------------------------------------------------------------- Pass@K

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k from n samples with c correct (the paper's estimator): 1 - C(n-c, k) /
    C(n, k), in the product form 1 - prod_{i=n-c+1..n} (1 - k/i), exact for large n; 1.0 when
    n - c < k. Raises ValueError unless 0 <= c <= n and 1 <= k <= n."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return 1.0 if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

def maj_at_k(keys: list[str], correct: list[bool], k: int) -> float:
    """Maj@k over disjoint groups of k samples: is the most frequent answer (first seen on ties)
    correct?"""
    hits = []
    for start in range(0, len(keys) - k + 1, k):
        votes = Counter(keys[start:start + k])
        winner = max(votes, key=lambda key: (votes[key], -keys.index(key, start)))
        hits.append(correct[keys.index(winner, start)])
    return float(np.mean(hits))

def evaluate(run: Context, problems: list[dict], ks=PASS_KS, maj_ks=(MAJ_K,),
             progress: bool = False) -> dict:
    """Pass@K, Maj@K, mean reward, token entropy and length of run.model, from args.eval_samples
    samples a problem, seeded by args.seed."""
    n = run.args.eval_samples
    graded = sample_and_grade(run, [p for p in problems for _ in range(n)], progress)
    per_problem = lambda key: torch.tensor(graded[key], dtype=torch.float64).view(-1, n)  # (P, n)
    rewards, sums, lengths = (per_problem(key) for key in ("rewards", "entropy_sums", "tokens"))
    correct, keys = rewards == 1.0, graded["keys"]  # (problems, n)
    result = {f"pass@{k}": float(np.mean([pass_at_k(n, int(c), k) for c in correct.sum(1)]))
              for k in ks if k <= n}
    for k in (k for k in maj_ks if k <= n):
        result[f"maj@{k}"] = float(np.mean([maj_at_k(keys[i * n:(i + 1) * n], row.tolist(), k)
                                            for i, row in enumerate(correct)]))
    return result | {"reward": float(rewards.mean()), "length": float(lengths.mean()),
                     "entropy": float(sums.sum() / lengths.sum()),
                     "correct": correct.sum(1).tolist(), "entropy_sums": sums.sum(1).tolist(),
                     "lengths": lengths.sum(1).tolist()}  # the last three per problem: intervals

def sample_and_grade(run: Context, rows: list[dict], progress: bool) -> dict[str, list]:
    """Each row's reward, Maj@K key, entropy sum and tokens, in row order: chunks of rollout_batch
    rows, seeded by their first row and dealt out among processes, gathered."""
    size, sampling = run.args.rollout_batch, run.args.sampling("eval", run.args.seed)
    prompts = [prompt_text(p, run.tokenizer) for p in rows]
    scored = []  # what is kept of each chunk this process decodes
    for start in tqdm(run.ranks.share(range(0, len(prompts), size)), desc="eval", leave=False,
                      disable=not (progress and run.ranks.is_main)):
        roll = run.generate(run.model, run.tokenizer, prompts[start:start + size],
                            dataclasses.replace(sampling, seed=sampling.seed + start))
        rewards, keys = zip(*map(run.grade, rows[start:start + size], roll.texts))
        scored.append({"first_row": start, "rewards": list(rewards), "keys": list(keys),
                       "entropy_sums": roll.entropy.sum(1).tolist(),  # (rows,) each
                       "tokens": roll.completion_mask.sum(1).tolist()})
    chunks = sorted((chunk for ranked in run.ranks.gather(scored) for chunk in ranked),
                    key=lambda chunk: chunk["first_row"])
    return {key: [value for chunk in chunks for value in chunk[key]]
            for key in ("rewards", "keys", "entropy_sums", "tokens")}

# ----------------------------------------------------------------------------- GRPO

def group_advantages(rewards: torch.Tensor, group: int, scale_std: bool = True) -> torch.Tensor:
    """A_i = (r_i - mean(group)) [/ std(group)]; rewards (B,) in consecutive groups of `group`;
    std is the sample standard deviation (n - 1, torch's default), no epsilon added; a group whose
    rewards are all equal gets 0."""
    grouped = rewards.view(-1, group)  # (B/G, G)
    centred = grouped - grouped.mean(1, keepdim=True)  # (B/G, G); rounding can leave it nonzero
    if scale_std:
        centred = centred / grouped.std(1, keepdim=True).clamp(min=1e-8)  # (B/G, G)
    constant = grouped.amax(1, keepdim=True) == grouped.amin(1, keepdim=True)  # (B/G, 1)
    return centred.masked_fill(constant, 0.0).flatten()  # (B,)

def grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip: float, beta: float, tokens=None):
    """(loss, statistics): the paper's GRPO objective, clipped surrogate plus beta * k3 KL to the
    reference, mean over completion tokens; statistics: the k3 KL's and clipped tokens' masked means
    (kl, clip_frac). logp, old_logp, ref_logp, mask: (B, T); advantages: (B,); tokens: divisor."""
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(1)  # (B, 1)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)  # (B, T)
    log_ref_ratio = ref_logp - logp  # (B, T)
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1  # (B, T) k3 estimator, >= 0
    loss = masked_mean(-surrogate + beta * kl, mask, tokens)  # ()
    clipped = ((ratio - 1).abs() > clip).float()  # (B, T)
    return loss, {"kl": float(masked_mean(kl.detach(), mask, tokens)),
                  "clip_frac": float(masked_mean(clipped, mask, tokens))}

@dataclass
class GRPOState:  # what GRPO keeps between steps
    optimizer: torch.optim.Optimizer  # AdamW
    reference: torch.nn.Module | None  # the frozen starting model of the KL term; None if beta = 0
    trainer: torch.nn.Module | None = None  # what scale/ backpropagates through (None: the model)

def grpo_step(run: Context, state: GRPOState, problems: list[dict], seed: int) -> dict:
    """Sample a group of grpo_group completions per prompt, score them, and take one AdamW step on
    grpo_loss with the group advantages. run()'s grpo_step hook: scale/grpo.py adds micro-batches,
    a prompt's keys and values shared by its group, processes, and epochs (--grpo-epochs)."""
    args, model = run.args, run.model
    G, temperature = args.grpo_group, args.grpo_temperature
    group = [p for p in problems for _ in range(G)]
    with torch.no_grad():
        roll = run.generate(model, run.tokenizer, [prompt_text(p, run.tokenizer) for p in group],
                            args.sampling("grpo", seed))
        rewards = score(run, group, roll.texts)  # (B,)
        advantages = group_advantages(rewards, G, args.grpo_scale_std).to(model.device)  # (B,)
        frozen = token_logprobs(state.reference, roll, temperature)[0] if args.grpo_beta else None
    model.train()
    logp, entropy = token_logprobs(model, roll, temperature)  # (B, T) each
    loss, stats = grpo_loss(logp, logp.detach(),  # one step on its own samples: the ratio is 1
                            logp.detach() if frozen is None else frozen, advantages,
                            roll.completion_mask, args.grpo_clip, args.grpo_beta)
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    state.optimizer.step()
    model.eval()
    grouped = rewards.view(-1, G)  # (prompts, G)
    return {"reward": float(rewards.mean()), "reward_std": float(rewards.std()),
            "loss": loss.item(),
            "entropy": float(masked_mean(entropy.detach(), roll.completion_mask)),
            **stats, "zero_std_frac": float((grouped.amax(1) == grouped.amin(1)).float().mean()),
            "sequences": len(group), "tokens": roll.tokens}

# ----------------------------------------------------------------------------- ES

def noise(seed: int, index: int, like: torch.Tensor, out=None) -> torch.Tensor:
    """eps of tensor `index` for member `seed` (into out, if given): per tensor, regenerable; -seed
    gives -eps. Seeding (exercises 9-11's figures depend on it): torch.randn of like's shape,
    float32, from a generator on like's device seeded with abs(seed) * 1_000_003 + index."""
    generator = torch.Generator(device=like.device).manual_seed(abs(seed) * 1_000_003 + index)
    eps = torch.randn(like.shape, generator=generator, device=like.device, dtype=torch.float32,
                      out=out)
    return eps.neg_() if seed < 0 else eps

def master_weights(params: list[torch.Tensor]) -> list[torch.Tensor]:  # what ES perturbs and moves
    return [p.detach().float().cpu().clone() for p in params]

@torch.no_grad()
def set_weights(params: list[torch.Tensor], master: list[torch.Tensor], seed: int | None = None,
                sigma: float = 0.0):
    """theta <- master (+ sigma * eps_seed) in place; seed=None restores it bit-exactly."""
    for index, (param, base) in enumerate(zip(params, master)):
        if seed is None:
            param.copy_(base)
        else:  # computed in the buffer of eps: one temporary the size of the tensor
            param.copy_(noise(seed, index, param).mul_(sigma).add_(base.to(param.device)))

def zscore(rewards: torch.Tensor) -> torch.Tensor:
    """(r - mean) / std across the population; all-equal rewards carry no signal and give zeros."""
    if rewards.max() == rewards.min():
        return torch.zeros_like(rewards)
    return (rewards - rewards.mean()) / rewards.std()

@torch.no_grad()
def es_update(params, master, seeds: list[int], z: torch.Tensor, alpha: float,
              drawn: dict | None = None):
    """theta <- theta + alpha * (1/N) sum_n z_n eps_n (the paper's ES update; 1/sigma folded into
    alpha), in fp32 on master. drawn: eps already generated, by (seed, tensor index)."""
    for index, (param, base) in enumerate(zip(params, master)):
        step = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
        for seed, weight in zip(seeds, z.tolist()):
            if weight:
                eps = (drawn or {}).pop((seed, index), None)
                step.add_(noise(seed, index, param) if eps is None else eps, alpha=weight)
        base.add_(step.to(base.device), alpha=alpha / len(seeds))
    set_weights(params, master)

def binary_entropy(p: torch.Tensor) -> torch.Tensor:
    return -(torch.xlogy(p, p) + torch.xlogy(1 - p, 1 - p))

def js_succ(success: torch.Tensor) -> float:
    """The paper's JS_succ, h(mean_i p_i) - mean_i h(p_i), averaged over problems; success: (N
    members, problems) success probabilities. es_step logs it of greedy 0/1 successes as
    `disagreement`, how split members are on a prompt (JS_succ needs p_i: eval.py diversity)."""
    return float((binary_entropy(success.mean(0)) - binary_entropy(success).mean(0)).mean())

@dataclass
class ESState:  # what ES keeps between updates
    members: list  # where each member's weights are set: the model's parameters, or an engine's
    master: list[torch.Tensor]  # the fp32 master copy that moves (departure 4)

def member_seeds(args: Args, seed: int) -> list[int]:
    """The population's noise seeds, eps_n = noise(seeds[n]); antithetic: pairs s and -s, so that
    sum_n z_n eps_n = sum over pairs (z_s - z_-s) eps_s."""
    draw = random.Random(seed).sample
    if args.es_antithetic:
        halves = draw(range(1, 2**31 - 1), args.es_population // 2)
        return [s for half in halves for s in (half, -half)]
    return draw(range(2**31 - 1), args.es_population)

def es_step(run: Context, state: ESState, problems: list[dict], seed: int) -> dict:
    """Score N perturbed copies master + sigma * eps_n on the same prompts (and sampling noise),
    then move toward the better ones. At scale each process scores some members; only scores are
    exchanged, eps regenerated from seeds (the scores, logged, remake the update undecoded)."""
    args, seeds = run.args, member_seeds(run.args, seed)
    scores, drawn = run.score_members(run, state, problems, seeds, seed)
    rewards = scores["reward"].float()  # (N,) each member's mean reward
    if args.es_null:  # the control: every member is credited with another's reward
        rewards = rewards[torch.randperm(len(seeds), generator=torch.Generator().manual_seed(seed))]
    z = args.fitness(rewards)  # (N,) z-scored, or centred (scale/: --es-shaping)
    run.es_update(state.members, state.master, seeds, z, args.es_alpha, drawn)
    tokens = int(scores["tokens"].sum())
    return {"reward": float(rewards.mean()), "reward_std": float(rewards.std()),
            "reward_max": float(rewards.max()), "disagreement": js_succ(scores["solved"].float()),
            "entropy": float(scores["entropy_sum"].sum()) / max(tokens, 1), "tokens": tokens,
            "sequences": len(seeds) * len(problems), "member_rewards": scores["reward"].tolist()}

def score_members(run: Context, state: ESState, problems: list[dict], seeds: list[int],
                  seed: int) -> tuple[dict, dict]:
    """Every member's reward, tokens and entropy sum, (N,), problems solved, (N, P), and the eps
    drawn that es_update may reuse, by (seed, tensor index): here none, members set in turn. The
    score_members hook: scale/es.py draws each eps once, batches them, over processes."""
    scores = new_scores(len(seeds), len(problems))
    prompts = [prompt_text(p, run.tokenizer) for p in problems]
    for member, member_seed in enumerate(seeds):
        set_weights(state.members, state.master, member_seed, run.args.es_sigma)
        roll = run.generate(run.model, run.tokenizer, prompts, run.args.sampling("es", seed))
        score_member(run, scores, member, problems, roll)
    return scores, {}

def new_scores(members: int, prompts: int) -> dict[str, torch.Tensor]:
    scores = {name: torch.zeros(members, dtype=torch.float64)
              for name in ("reward", "tokens", "entropy_sum")}  # (N,) each
    return scores | {"solved": torch.zeros(members, prompts, dtype=torch.float64)}  # (N, P)

def score_member(run: Context, scores: dict, member: int, problems: list[dict], roll: Rollout):
    rewards = score(run, problems, roll.texts)  # (P,)
    scores["reward"][member], scores["tokens"][member] = float(rewards.mean()), roll.tokens
    scores["entropy_sum"][member] = float(roll.entropy.sum())
    scores["solved"][member] = rewards == 1.0

# ----------------------------------------------------------------------------- schedule

def stages_of(algo: str, steps: int) -> list[tuple[str, int]]:  # claim 3: the budget split evenly
    names = algo.split("-")
    return [(name, steps // len(names) + (i < steps % len(names))) for i, name in enumerate(names)]

@dataclass
class Stage:
    """A stage of the schedule and all it keeps between updates (scale/runs.py saves it)."""
    index: int  # in the schedule
    name: str  # es or grpo
    updates: int
    offset: int  # updates of the stages before it
    state: ESState | GRPOState
    rng: random.Random  # draws each update's problems
    done: int = 0  # updates taken
    totals: dict = field(default_factory=lambda: dict(sequences=0, tokens=0, seconds=0.0))

def new_stage(run: Context, schedule: list, index: int) -> Stage:
    """ES keeps its fp32 master weights (its members: the model's weights, or es_weights, an
    engine's); GRPO keeps AdamW's state and the frozen starting model of the KL term."""
    (name, updates), params, args = schedule[index], list(run.model.parameters()), run.args
    if name == "es":
        state = ESState(run.es_weights(run.model) if run.es_weights else params,
                        master_weights(params))
    else:
        frozen = copy.deepcopy(run.model).eval().requires_grad_(False) if args.grpo_beta else None
        trainer = run.ranks.grpo_trainer(run.model, frozen)
        optimizer = torch.optim.AdamW(trainer.parameters(), lr=args.grpo_lr, weight_decay=0.0)
        state = GRPOState(optimizer, frozen, trainer)
    offset = sum(updates for _, updates in schedule[:index])
    rng = random.Random(f"{args.seed}-{name}-{offset}")
    return Stage(index, name, updates, offset, state, rng)

def train_stage(run: Context, stage: Stage, metrics, results: list) -> dict:
    """The stage's updates from where the run folder left it, each with a metrics line and a
    progress line, the folder shown the stage and the results so far; returns the stage's cost."""
    run.folder.resume_stage(run, stage)
    args, es, params = run.args, stage.name == "es", list(run.model.parameters())
    home, step = params[0].device, es_step if es else run.grpo_step
    checked = stage.state.master if es and run.es_weights else params  # finite, alike everywhere
    for update in tqdm(range(stage.done, stage.updates), desc=stage.name, initial=stage.done,
                       total=stage.updates, leave=False, disable=not run.ranks.is_main):
        tick, number = time.time(), stage.offset + update + 1
        count = min(len(run.train), args.es_prompts if es else args.grpo_prompts)
        stats = step(run, stage.state, stage.rng.sample(run.train, count),
                     args.seed * 1_000_003 + number - 1)
        if not (math.isfinite(stats.get("loss", 0.0))
                and all(torch.isfinite(p).all() for p in checked)):
            raise SystemExit(f"update {number} ({stage.name}): non-finite loss or weights; stopped")
        run.ranks.after_update(checked, stage=stage.name, update=number,
                               last=update + 1 == stage.updates)
        seconds, stage.done, totals = time.time() - tick, update + 1, stage.totals
        spent = {"sequences": stats["sequences"], "tokens": stats["tokens"], "seconds": seconds}
        stage.totals = {key: totals[key] + spent[key] for key in totals}
        line = {"update": number, "stage": stage.name, **stats, "seconds": round(seconds, 3),
                "seq_per_s": round(stats["sequences"] / seconds, 1),
                "sequences": stage.totals["sequences"], "tokens": stage.totals["tokens"]}
        record(run, metrics, line, f"{stage.done}/{stage.updates}")
        run.folder.after_update(run, stage, results)
    if es:  # the model takes the master's values (an engine's members leave it as it was)
        set_weights(params, stage.state.master)
    run.model.to(home)
    return stage.totals

def record(run: Context, metrics, line: dict, progress: str):
    """An update's metrics line (with a trajectory point every eval_every updates: eval.py plots the
    path) and its progress line."""
    args, name = run.args, line["stage"]
    if args.eval_every and line["update"] % args.eval_every == 0:
        point = dataclasses.replace(run, args=dataclasses.replace(
            args, eval_samples=args.trajectory_samples))
        line["eval"] = evaluate(point, run.evaluation, (*PASS_KS, args.trajectory_samples), ())
    print(strict_json(line), file=metrics, flush=True)
    extra = f"disagree {line['disagreement']:.3f}" if name == "es" else f"kl {line['kl']:.4f}"
    run.ranks.log(f"{name} {progress} reward {line['reward']:.3f} ent {line['entropy']:.3f} "
                  f"{extra} {line['seconds']:.2f}s {line['seq_per_s']:.0f} seq/s")

# ----------------------------------------------------------------------------- run

class OneProcess:
    """run()'s `ranks` hook: how work splits over processes; here one, each method a no-op.
    scale/distributed.py fills them for torchrun: process groups, parallel GRPO trainers, checks
    that every process holds the same weights."""
    rank, world_size, is_main = 0, 1, True

    def start(self, device: str) -> str: return device  # join the others; this process's device
    def stop(self): pass
    def barrier(self): pass
    def log(self, text: str): log(text)  # said once, not once per process
    def share(self, items) -> list: return list(items)[self.rank::self.world_size]  # dealt in turn
    def sum(self, values): return values  # a tensor, number or dict of them, summed over processes
    def gather(self, item) -> list: return [item]  # every process's item, in rank order
    def grpo_trainer(self, model, reference): return model  # what GRPO backpropagates through
    def after_update(self, params: list, stage: str, update: int, last: bool): pass  # all agree?

ONE_PROCESS = OneProcess()

class RunFolder:
    """run()'s `folder` hook: where a run's files go: --out, made once every input is read, never
    over a folder that holds anything; config.json, metrics.jsonl, a model per stage, summary.json.
    scale/runs.py adds checkpoints, --resume, --overwrite and a lock."""
    def open(self, args: Args, ranks) -> Args:  # before anything is loaded: the args to run
        out = Path(args.out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise BadInput(f"--out {out}: exists; python -m scale.train --resume {out} continues a "
                           "run, --overwrite replaces one (never a folder that holds no run)")
        return args

    def create(self, args: Args, ranks):  # every input read: the folder, with config.json
        out = Path(args.out)
        ranks.barrier()  # every process has looked (open) before the main one writes
        if ranks.is_main:
            out.mkdir(parents=True, exist_ok=True)  # it may be there, empty (open)
            (out / "config.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
        ranks.barrier()

    def restore(self, run, schedule: list) -> tuple[list, int]:
        return [], 0  # the results so far, the stage to start
    def resume_stage(self, run, stage: Stage): pass  # a stage starts at its first update
    def after_update(self, run, stage: Stage, results: list): pass
    def after_stage(self, run, index: int, results: list): pass
    def close(self): pass

@dataclass
class Context:
    """What a run's steps and evaluations share: its settings, its model, and run()'s hooks."""
    args: Args
    model: torch.nn.Module
    tokenizer: object
    # run()'s hooks: each one's default is this file's form; scale/assembly.py fills them
    generate: Callable = rollout  # or a function with its signature (scale/: chunks, vLLM)
    ranks: OneProcess = ONE_PROCESS  # how work splits over processes (scale/distributed.py)
    es_weights: Callable | None = None  # model -> where ES sets members (scale/: an engine's)
    score_members: Callable = score_members  # scale/es.py: batched, eps drawn once, processes
    grpo_step: Callable = grpo_step  # scale/grpo.py: micro-batches, shared prompts, processes
    folder: RunFolder = field(default_factory=RunFolder)  # run files (scale/runs.py: --resume)
    problems: Callable = evaluation_sets  # (args, tokenizer) -> problems (scale/config.py: files)
    grade: Callable = grade  # (problem, completion) -> (reward, key) (scale/verifier.py: bounded)
    es_update: Callable = es_update  # scale/es.py: from the eps the scorer summed or kept
    train: list[dict] = field(default_factory=list)
    evaluation: list[dict] = field(default_factory=list)  # evaluated after each stage
    heldout: dict = field(default_factory=dict)  # task family -> problems (forgetting)

def run(args: Args, **hooks) -> dict:
    """Evaluate the base model, train each stage of the schedule, evaluate and save after each.
    hooks: Context's hooks by name (scale/ fills them; see Context)."""
    folder = hooks.setdefault("folder", RunFolder())
    try:
        return train_schedule(prepare(args, hooks))
    finally:
        folder.close()  # a lock it holds is released however the run ends

def prepare(args: Args, hooks: dict) -> Context:
    """Every input read and checked, then the run folder made."""
    ranks, folder = hooks.get("ranks", ONE_PROCESS), hooks["folder"]
    device = ranks.start("cuda" if args.device == "auto" and torch.cuda.is_available() else
                         "cpu" if args.device == "auto" else args.device)
    args = folder.open(args, ranks)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    model, tokenizer = load_model(args.model, device, args.dtype)  # in eval mode
    train, evaluation, heldout = hooks.get("problems", evaluation_sets)(args, tokenizer)
    folder.create(args, ranks)
    ranks.log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
              f"{len(train)} training / {len(evaluation)} eval problems, held out: "
              f"{', '.join(heldout) or 'none'}; algo {args.algo}, {args.steps} updates")
    return Context(args, model, tokenizer, **hooks, train=train, evaluation=evaluation,
                   heldout=heldout)

def train_schedule(run: Context) -> dict:
    """The schedule's stages in turn (from where the run folder left off); the run's summary."""
    args, ranks, out = run.args, run.ranks, Path(run.args.out)
    schedule = stages_of(args.algo, args.steps)
    results, first = run.folder.restore(run, schedule)
    results = results or [measure(run, "base", dict(sequences=0, tokens=0, seconds=0.0))]
    with open(out / "metrics.jsonl" if ranks.is_main else os.devnull, "a") as metrics:
        for index, (name, _) in enumerate(schedule[first:], first):
            cost = train_stage(run, new_stage(run, schedule, index), metrics, results)
            gc.collect()  # free what the stage built now: a wrapped trainer can sit in cycles
            if ranks.is_main:
                run.model.save_pretrained(out / f"stage{index + 1}-{name}")
                run.tokenizer.save_pretrained(out / f"stage{index + 1}-{name}")
            results.append(measure(run, name, cost))
            run.folder.after_stage(run, index, results)
            ranks.log(f"{name}: pass@1 {results[-1]['pass@1']:.3f}, {cost['seconds']:.0f}s")
    summary = {"algo": args.algo, "seed": args.seed, "world_size": ranks.world_size,
               "stages": results}
    if ranks.is_main:
        (out / "summary.json").write_text(strict_json(summary, indent=2))
    ranks.log(markdown_table({row["name"]: row for row in results}, TABLE_COLUMNS, "stage"))
    ranks.stop()
    return summary

def measure(run: Context, name: str, cost: dict) -> dict:
    """A stage's results: Pass@K and the rest on the evaluation set and each held-out family."""
    result = evaluate(run, run.evaluation) | {f"heldout_{task}": evaluate(run, problems)
                                              for task, problems in run.heldout.items()}
    k = max(k for k in PASS_KS if k <= run.args.eval_samples)
    scores = [result[f"heldout_{task}"][f"pass@{k}"] for task in run.heldout]
    result[f"heldout_pass@{k}"] = float(np.mean(scores)) if scores else None
    return {"name": name, **result, **cost}

def strict_json(value, **options) -> str:  # not a number (vLLM's entropy: NaN): null
    nulled = json.loads(json.dumps(value), parse_constant=lambda _: None)  # NaN, Infinity
    return json.dumps(nulled, allow_nan=False, **options)

def markdown_table(rows: dict[str, dict], columns: list[str], label: str = "model") -> str:
    lines = [f"| {label} | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for name, row in rows.items():
        cells = ["-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                 for v in map(row.get, columns)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

# ----------------------------------------------------------------------------- math-verify, bounded

def latex_compare(reference: str, prediction: str, bounded: bool = True) -> tuple[bool, bool, str]:
    """(found, equal, key): math-verify's last LaTeX answer in prediction, whether it equals
    reference, and its Maj@K form (0.5 and \\frac12: 1/2). LaTeX only (the plain path is sympy's
    parse_expr, an eval), each call within math-verify's SIGALRM timer of MATH_SECONDS: on the main
    thread only, elsewhere a one-line refusal (scale/verifier.py's worker: any thread, killed)."""
    import logging
    from fractions import Fraction  # also in the worker's copy of this function (scale/verifier.py)

    import sympy
    from math_verify import LatexExtractionConfig, parse, verify
    thread, seconds = threading.current_thread(), math.ceil(MATH_SECONDS) if bounded else None
    if bounded and thread is not threading.main_thread():
        raise RuntimeError(f"LaTeX answers are read by math-verify, bounded by a timer that works "
                           f"on the main thread only, not in {thread.name}: scale.verifier.grade "
                           "runs it in a worker process, bounded in any thread")
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # a timeout: no answer, no line
    latex, reference = [LatexExtractionConfig(boxed_match_priority=0)], reference[:MAX_ANSWER_CHARS]
    delimited = any(mark in reference for mark in ("$", "\\boxed", "\\(", "\\["))
    try:
        gold = parse(reference if delimited else f"${reference}$", latex, parsing_timeout=seconds)
        guess = parse(prediction[-4 * MAX_ANSWER_CHARS:], latex, parsing_timeout=seconds)
        equal = bool(gold and guess) and verify(gold, guess, timeout_seconds=seconds)
    except Exception:  # noqa: BLE001 (a failed parse, MemoryError, RecursionError: no answer)
        return False, False, ""
    if not guess:
        return False, False, ""
    value = guess[0]
    if isinstance(value, (sympy.Integer, sympy.Rational, sympy.Float)) and value.is_finite:
        value = Fraction(int(value.p), int(value.q)) if value.is_Rational else Fraction(str(value))
    return True, bool(equal), "".join(str(value).split())


# ----------------------------------------------------------------------------- main

if __name__ == "__main__":
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.exit("es_grpo.py runs one process; under torchrun, run -m scale.train (same flags)")
    run(parse_args())
