"""Claim 5's measurement: held-out task families before and after training, against a control of
signal-free noise the size of ES's update."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from analyses.evaluation import (context, curve_ks, evaluate_model, load, measured, named_weights,
                                 put_weights, versioned, weights_of)
from analyses.statistics import per_problem
from es_grpo import evaluate
from scale.config import Args, evaluation_sets

# a held-out family the base model solves this often (Pass@1) has little room to show anything
SATURATED = 0.95


@dataclasses.dataclass
class HeldOut:  # the held-out problems forgetting_control evaluates on
    base: str  # the model before training (its tokenizer makes the problems' prompts)
    problems: int  # a family
    # those not saturated for the base model
    families: list[str] = dataclasses.field(default_factory=list)


def forgetting_control(base_name: str, es_models: list[str], grpo_models: list[str], args: Args,
                       problems: int, measure=measured) -> dict:
    """Held-out families that are not saturated (the base model's Pass@1 below SATURATED),
    `problems` each: per-problem counts (seeds, P) for the base model, ES and GRPO (a model per
    seed) and a control per seed: the base plus signal-free Gaussian noise whose RMS, tensor by
    tensor, is that of the seed's ES update. Each model's counts are a piece of their own (measure:
    analyses.evaluation.measured)."""
    first = measure("forgetting-base", [base_name], heldout_base,
                    HeldOut(base_name, problems), args)
    held = HeldOut(base_name, problems, first["families"])
    result = {"families": held.families, "problems": problems, "samples": args.eval_samples,
              "base": [first["correct"]] * len(es_models), "saturated": first["saturated"],
              "es": [], "grpo": [], "noise": []}
    for seed, (es, grpo) in enumerate(zip(es_models, grpo_models)):
        for kind, model, noise_seed in (("es", es, None), ("noise", es, seed),
                                        ("grpo", grpo, None)):
            result[kind].append(measure(f"forgetting-{kind}-{seed}", [base_name, model],
                                        heldout_counts, held, model, noise_seed, args))
    k = min(32, args.eval_samples)
    result["means"] = {
        name: {f"pass@{kk}": float(np.mean(per_problem(result[name], args.eval_samples, kk)))
               for kk in (1, k)}
        for name in ("base", "es", "grpo", "noise")}
    return result


@versioned(1)
def heldout_base(held: HeldOut, args: Args) -> dict:
    """The base model on every held-out family: the families it does not saturate and its counts on
    them."""
    model, tokenizer = load(held.base, args)
    heldout, run = heldout_sets(held, args, tokenizer), context(args, model, tokenizer)
    first = {task: evaluate(run, problems, (1,), ()) for task, problems in heldout.items()}
    families = [task for task, row in first.items() if row["pass@1"] < SATURATED]
    return {"families": families,
            "correct": [c for task in families for c in first[task]["correct"]],
            "saturated": {task: row["pass@1"]
                          for task, row in first.items() if task not in families}}


@versioned(1)
def heldout_counts(held: HeldOut, model_name: str, noise_seed: int | None, args: Args) -> list[int]:
    """Per-problem correct answers on the held-out families: of model_name's weights, or with a
    noise_seed, of the base plus Gaussian noise (seeded so) whose RMS, tensor by tensor, is that of
    model_name's update."""
    model, tokenizer = load(held.base, args)
    weights = weights_of(model_name, args)
    if noise_seed is not None:
        base, generator = named_weights(model), torch.Generator().manual_seed(noise_seed)
        weights = {name: base[name] + torch.randn(base[name].shape, generator=generator)
                   * (weights[name] - base[name]).pow(2).mean().sqrt() for name in base}
    put_weights(model, weights)
    heldout, run = heldout_sets(held, args, tokenizer), context(args, model, tokenizer)
    return [c for task in held.families for c in evaluate(run, heldout[task], (1,), ())["correct"]]


def heldout_sets(held: HeldOut, args: Args, tokenizer) -> dict[str, list[dict]]:
    return evaluation_sets(dataclasses.replace(args, heldout_problems=held.problems), tokenizer)[2]


def forgetting_deltas(before: str, after: list[str], args: Args) -> dict:
    """Each trained model's held-out Pass@K (the smallest and largest K) minus the model's before
    training, per family; with every model's evaluation (evaluate_model)."""
    results = {name: evaluate_model(*load(name, args), args) for name in [before, *after]}
    families = [key for key in results[before] if key.startswith("heldout_")]
    ks = curve_ks(args.eval_samples)
    deltas = {name: {f"{family[8:]} pass@{k}": results[name][family][f"pass@{k}"]
                     - results[before][family][f"pass@{k}"]
                     for family in families for k in (ks[0], ks[-1])} for name in after}
    return {"before": before, "results": results, "deltas": deltas}
