"""Models in and numbers out: load a model, put weights into it, evaluate it (Pass@K, Maj@K, greedy
accuracy, entropy) on the evaluation problems and the held-out families, with the runs' own
settings."""
from __future__ import annotations

import numpy as np
import torch

import es_grpo
from es_grpo import Context, Sampling, evaluate, load_model, score
# what the analyses decode, score and grade with: the runs' hooks
from scale.assembly import context
from scale.config import Args, evaluation_sets

EVAL_FLAGS = ("data", "eval_data", "task", "eval_split", "eval_problems", "heldout_problems",
              "eval_samples",
              "eval_temperature", "eval_top_p", "max_new_tokens", "rollout_batch", "device",
              "dtype", "rollout_dtype", "seed")


def evaluation_args(source) -> Args:
    """The evaluation settings (EVAL_FLAGS) of anything that has them: parsed flags or a run's
    Args."""
    return Args(**{name: getattr(source, name) for name in EVAL_FLAGS})


def curve_ks(n: int) -> list[int]:
    """K = 1, 2, 4, ... up to n, and n itself."""
    return sorted({2 ** i for i in range(int(np.log2(n)) + 1)} | {n})


def load(name: str, args: Args):
    device = (args.device if args.device != "auto"
              else "cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model("" if name in ("", "tiny") else name, device, args.dtype)
    return model.eval(), tokenizer


def named_weights(model) -> dict[str, torch.Tensor]:
    """Parameters by name, each once (tied embeddings count once), in fp32 on the CPU."""
    return {name: p.detach().float().cpu().clone() for name, p in model.named_parameters()}


def weights_of(name: str, args: Args) -> dict[str, torch.Tensor]:
    """A model's weights by name (named_weights), loaded with the evaluation's device and dtype."""
    return named_weights(load(name, args)[0])


def put_weights(model, weights: dict[str, torch.Tensor]):
    """Copy named weights (named_weights' form) into the model, in place."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(weights[name])


def greedy_accuracy(run: Context, problems: list[dict]) -> float:
    roll = run.generate(run.model, run.tokenizer,
                        [es_grpo.prompt_text(p, run.tokenizer) for p in problems],
                        Sampling(max_new_tokens=run.args.max_new_tokens,
                                 batch_size=run.args.rollout_batch))
    return float((score(run, problems, roll.texts) == 1.0).float().mean())


def evaluate_model(model, tokenizer, args: Args) -> dict:
    """Pass@K and Maj@K for every K of the curve, greedy accuracy, entropy and length, on the
    evaluation problems and on each held-out task family."""
    _, evaluation, heldout = evaluation_sets(args, tokenizer)
    ks, run = curve_ks(args.eval_samples), context(args, model, tokenizer)
    result = {"problems": len(evaluation), **evaluate(run, evaluation, ks, ks, progress=True),
              "greedy": greedy_accuracy(run, evaluation)}
    for task, problems in heldout.items():
        result[f"heldout_{task}"] = {**evaluate(run, problems, ks, ks, progress=True),
                                     "greedy": greedy_accuracy(run, problems)}
    return result


def measured(name: str, models: list[str], function, *arguments):
    """function(*arguments): an analysis's piece measured here and now. reproduce passes its
    Store.get instead (the same signature), which saves each piece under NAME, so that a stopped
    reproduction keeps the pieces it finished."""
    return function(*arguments)


def versioned(number: int):
    """Marks a measurement that reproduce saves (Store.get): its saved result is keyed by this
    version, its arguments and its models. Bump it when what the function measures changes; a
    refactor that moves no number keeps it, so nothing is measured again. tests/test_golden.py
    holds each one's result on a small fixture: a number that moves without a bump fails there."""
    def mark(function):
        function.version = number
        return function
    return mark


def final(summary: dict) -> dict:
    """A run's summary.json: its last stage's evaluation."""
    return summary["stages"][-1]
