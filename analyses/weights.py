"""Claim 4's measurements on weights: relative L2 drift per module kind, the update sparsified (its
smallest coordinates zeroed) against random masks and a null run's update, and what Gaussian
geometry keeps."""
from __future__ import annotations

import dataclasses
from statistics import NormalDist

import torch

import es_grpo
from analyses.evaluation import context, load, named_weights, put_weights, versioned, weights_of
from es_grpo import evaluate
from scale.config import Args, evaluation_sets

MODULE_KINDS = (("embeddings", ("embed",)), ("lm_head", ("lm_head",)), ("norms", ("norm",)),
                ("attention", ("attn", "attention")), ("mlp", ("mlp", "feed_forward")))
ZEROED = (0.5, 0.7, 0.78, 0.9, 0.95)  # eval.py sparsity: fractions of the update zeroed, by default
PAPER_SPARSITY = 0.78  # claim 4: zeroing about 78% of the ES update keeps Pass@1
RANDOM_MASKS = 5  # random masks per ES seed, the control of the sparse update (claim 4)
# largest drift, the paper
PAPER_MODULES = {"es": {"norms", "attention"}, "grpo": {"embeddings", "lm_head"}}


def module_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, marks in MODULE_KINDS if any(mark in lowered for mark in marks)),
                "other")


def drift(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]) -> dict:
    """Relative L2 distance ||theta - theta_base|| / ||theta_base||, in total and per module
    kind."""
    if base.keys() != trained.keys():
        raise es_grpo.BadInput("eval.py drift: the models have different parameters")
    delta_sq, base_sq = {}, {}
    for name in base:
        kind = module_kind(name)
        delta_sq[kind] = delta_sq.get(kind,
                                      0.0) + float((trained[name]
                                                    - base[name]).double().pow(2).sum())
        base_sq[kind] = base_sq.get(kind, 0.0) + float(base[name].double().pow(2).sum())
    result = {kind: (delta_sq[kind] / base_sq[kind]) ** 0.5 if base_sq[kind] else 0.0 for kind
              in delta_sq}
    result["total"] = (sum(delta_sq.values()) / sum(base_sq.values())) ** 0.5
    return result


@versioned(1)
def drifts(base_name: str, models: list[str], args: Args) -> list[dict]:
    """Each model's relative L2 drift from the base model, per module kind and in total
    (drift())."""
    base = weights_of(base_name, args)
    return [drift(base, weights_of(name, args)) for name in models]


@versioned(1)
def drift_analysis(base_name: str, trained: list[str], args: Args) -> dict:
    """Each trained model's relative L2 drift from the base, per module kind; with two models, the
    ratio of the first's total drift to the second's."""
    return drift_table(base_name, dict(zip(trained, drifts(base_name, trained, args))))


def drift_table(base_name: str, results: dict[str, dict]) -> dict:
    """drift_analysis's result from drifts' rows: with two models, the first's total drift over the
    second's."""
    names, ratio = list(results), {}
    if len(names) == 2 and results[names[1]]["total"] > 0:
        ratio = {f"{names[0]} / {names[1]}": results[names[0]]["total"]
                 / results[names[1]]["total"]}
    return {"base": base_name, "drift": results, "ratio": ratio}


def sparsify(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor], tau: float,
             keep_at_random: float | None = None, seed: int = 0):
    """theta_base + delta * mask, and the fraction of coordinates whose update was zeroed. mask:
    |delta| > tau; or, the control, each coordinate kept with probability keep_at_random: the same
    sparsity, blind to size."""
    kept, zeroed, total = {}, 0, 0
    generator = torch.Generator().manual_seed(seed)
    for name in base:
        delta = trained[name] - base[name]
        mask = (delta.abs() > tau if keep_at_random is None
                else torch.rand(delta.shape, generator=generator) < keep_at_random)
        kept[name] = base[name] + delta * mask
        zeroed += int((~mask).sum())
        total += mask.numel()
    return kept, zeroed / total


def zeroing_threshold(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor],
                      fraction: float) -> float:
    """The tau that zeroes `fraction` of the update's coordinates: that quantile of |delta|."""
    magnitudes = torch.cat([(trained[name] - base[name]).abs().flatten() for name in base])
    return float(magnitudes.kthvalue(max(1, round(fraction * magnitudes.numel()))).values)


@dataclasses.dataclass
class SparsityMasks:  # which sparsified updates sparsity_analysis measures
    # fractions of the update's coordinates zeroed, smallest |delta| first; or taus
    values: list[float]
    by_tau: bool = False  # values are thresholds: zero |delta| <= tau
    null: str = ""  # a null ES run's model, its update sparsified the same way: the second control


@versioned(1)
def sparsity_analysis(base_name: str, trained_name: str, masks: SparsityMasks, args: Args) -> dict:
    """Pass@1 and Pass@k of the trained model with its update sparsified (largest kept), against a
    random mask of the same sparsity and, given masks.null, the null update sparsified alike; also
    the whole update's and the base's."""
    model, tokenizer = load(trained_name, args)
    base, trained = weights_of(base_name, args), named_weights(model)
    _, evaluation, _ = evaluation_sets(args, tokenizer)
    k = max(k for k in es_grpo.PASS_KS if k <= args.eval_samples)

    run = context(args, model, tokenizer)  # its decoding copy (--rollout-dtype) follows put_weights

    def measure_weights(weights) -> dict:
        put_weights(model, weights)
        return evaluate(run, evaluation, (1, k), ())

    null = weights_of(masks.null, args) if masks.null else None
    full = measure_weights(trained)
    full["base"] = measure_weights(base)  # every update zeroed, against which the gain is measured
    if null is not None:
        full["null"] = measure_weights(null)
    rows = {label: sparsity_row(measure_weights(kept), kind, tau, zeroed, full, k)
            for label, kind, kept, zeroed, tau
            in sparsified_updates(base, trained, null, masks, args.seed)}
    return {"base": base_name, "trained": trained_name, "samples": args.eval_samples, "full": full,
            "rows": rows}


def sparsified_updates(base: dict, trained: dict, null: dict | None, masks: SparsityMasks,
                       seed: int):
    """(label, mask kind, weights, sparsity, tau) of each update sparsified, in the report's
    order."""
    for value in masks.values:
        tau = value if masks.by_tau else zeroing_threshold(base, trained, value)
        weights, sparsity = sparsify(base, trained, tau)
        name = f"tau={value:g}" if masks.by_tau else f"zeroed={100 * value:g}%"
        yield name, "largest kept", weights, sparsity, tau
        yield (f"random, {name}", "random mask",
               *sparsify(base, trained, tau, keep_at_random=1 - sparsity, seed=seed), tau)
        # the null update, its own smallest coordinates zeroed to the same sparsity
        if null is not None:
            null_tau = tau if masks.by_tau else zeroing_threshold(base, null, value)
            yield f"null, {name}", "null ES run", *sparsify(base, null, null_tau), tau


def sparsity_row(result: dict, kind: str, tau: float, zeroed: float, full: dict, k: int) -> dict:
    gain = full["pass@1"] - full["base"]["pass@1"]
    return {"mask": kind, "tau": tau, "sparsity": zeroed, "pass@1": result["pass@1"],
            f"pass@{k}": result[f"pass@{k}"],
            "pass@1_kept": result["pass@1"] / full["pass@1"] if full["pass@1"] else float("nan"),
            "gain_kept": (result["pass@1"] - full["base"]["pass@1"]) / gain if gain > 0
            else float("nan"), "correct": result["correct"]}


@versioned(1)
def sparse_over_seeds(base_name: str, es_models: list[str], null_models: list[str],
                      args: Args) -> dict:
    """Claim 4 on every ES seed: per-problem correct counts of the base model, each seed's whole
    update, the update with its smallest PAPER_SPARSITY of coordinates zeroed, and RANDOM_MASKS
    random masks of the same sparsity; each null ES run's whole and sparsified update beside them
    (one per seed)."""
    model, tokenizer = load(base_name, args)
    _, evaluation, _ = evaluation_sets(args, tokenizer)
    base = named_weights(model)

    run = context(args, model, tokenizer)  # its decoding copy (--rollout-dtype) follows put_weights

    def correct(weights) -> list[int]:
        put_weights(model, weights)
        return evaluate(run, evaluation, (1,), ())["correct"]

    result = {"samples": args.eval_samples, "sparsity": PAPER_SPARSITY, "base": correct(base),
              "full": [], "top": [], "random": []}
    for trained in [weights_of(name, args) for name in es_models]:
        kept, sparsity = sparsify(base, trained, zeroing_threshold(base, trained, PAPER_SPARSITY))
        result["full"].append(correct(trained))
        result["top"].append(correct(kept))
        result["random"].append([correct(sparsify(base, trained, 0.0, keep_at_random=1 - sparsity,
                                                  seed=mask)[0])
                                 for mask in range(RANDOM_MASKS)])
    result["null_full"], result["null_top"] = [], []
    for null in [weights_of(name, args) for name in null_models]:
        result["null_full"].append(correct(null))
        result["null_top"].append(correct(sparsify(
            base, null, zeroing_threshold(base, null, PAPER_SPARSITY))[0]))
    return result


def module_kinds_seeds(drifts: list[dict], algo: str) -> tuple[int, int]:
    """(seeds whose ranking the paper's largest-drift module kinds lead, seeds): ES's two largest
    are norms and attention; GRPO's, the embeddings and LM head (one kind when the model ties
    them)."""
    wanted = PAPER_MODULES[algo] & set(drifts[0])  # a tied head is no kind of its own
    ranked = [sorted((k for k in row if k not in ("total", "other")), key=row.get,
                     reverse=True) for row in drifts]
    return sum(set(order[:len(wanted)]) == wanted for order in ranked), len(drifts)


def gaussian_kept_share(zeroed: float) -> float:
    """The share of a small, spread-out signal's projection that keeping the largest (1 - zeroed) of
    an update's coordinates keeps, when the update is Gaussian of one scale on every coordinate
    (ES's is: alpha/N sum_n z_n eps_n). With delta_j ~ N(s_j, scale^2) and the cut at t = c x scale,
    to first order in s: E[delta_j 1{|delta_j| > t}] = s_j (2Q(c) + 2c phi(c)), 2Q(c) the share of
    coordinates kept. A random mask keeps 2Q(c); only a kept share above this one says the gain sits
    in the large coordinates (tests/test_weights.py simulates both)."""
    kept = 1 - zeroed
    cut = NormalDist().inv_cdf(1 - kept / 2)
    return kept + 2 * cut * NormalDist().pdf(cut)
