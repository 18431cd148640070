"""Claim 5's measurement: held-out task families before and after training, against a control of
signal-free noise the size of ES's update."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from analyses.evaluation import context, curve_ks, evaluate_model, load, named_weights, put_weights, weights_of
from analyses.statistics import per_problem
from es_grpo import evaluate
from scale.config import Args, evaluation_sets

SATURATED = 0.95  # a held-out family the base model solves this often (Pass@1) has little room to show anything


def forgetting_control(base_name: str, es_models: list[str], grpo_models: list[str], args: Args,
                       problems: int) -> dict:
    """Held-out families that are not saturated (the base model's Pass@1 below SATURATED), `problems` each:
    per-problem counts (seeds, P) for the base model, ES and GRPO (a model per seed) and a control per seed:
    the base plus signal-free Gaussian noise whose RMS, tensor by tensor, is that of the seed's ES update."""
    model, tokenizer = load(base_name, args)
    _, _, heldout = evaluation_sets(dataclasses.replace(args, heldout_problems=problems), tokenizer)
    base = named_weights(model)

    def counts(weights) -> list[int]:
        put_weights(model, weights)
        return [c for task in families for c in evaluate(run, heldout[task], (1,), ())["correct"]]

    families = list(heldout)
    run = context(args, model, tokenizer)
    first = {task: evaluate(run, heldout[task], (1,), ()) for task in families}
    families = [task for task in families if first[task]["pass@1"] < SATURATED]
    result = {"families": families, "problems": problems, "samples": args.eval_samples,
              "base": [[c for task in families for c in first[task]["correct"]]] * len(es_models),
              "saturated": {task: row["pass@1"] for task, row in first.items() if task not in families},
              "es": [], "grpo": [], "noise": []}
    for seed, (es, grpo) in enumerate(zip(es_models, grpo_models)):
        trained = weights_of(es, args)
        generator = torch.Generator().manual_seed(seed)
        noise = {name: base[name] + torch.randn(base[name].shape, generator=generator)
                 * (trained[name] - base[name]).pow(2).mean().sqrt() for name in base}
        result["es"].append(counts(trained))
        result["noise"].append(counts(noise))
        result["grpo"].append(counts(weights_of(grpo, args)))
    k = min(32, args.eval_samples)
    means = {name: {f"pass@{kk}": float(np.mean(per_problem(result[name], args.eval_samples, kk)))
                    for kk in (1, k)} for name in ("base", "es", "grpo", "noise")}

    result["means"] = means
    return result


def forgetting_deltas(before: str, after: list[str], args: Args) -> dict:
    """Each trained model's held-out Pass@K (the smallest and largest K) minus the model's before training,
    per family; with every model's evaluation (evaluate_model)."""
    results = {name: evaluate_model(*load(name, args), args) for name in [before, *after]}
    families = [key for key in results[before] if key.startswith("heldout_")]
    ks = curve_ks(args.eval_samples)
    deltas = {name: {f"{family[8:]} pass@{k}": results[name][family][f"pass@{k}"] - results[before][family][f"pass@{k}"]
                     for family in families for k in (ks[0], ks[-1])} for name in after}
    return {"before": before, "results": results, "deltas": deltas}
