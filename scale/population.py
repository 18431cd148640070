"""The ES population decoded in one batch: scale/es.py's batched path.

es_grpo.score_members scores the members one at a time, each set in the model's weights. Here every
member's rows are decoded together, each row block with its member's weights master + sigma * eps_n,
through batched matmuls on stacked weights (embedding, linear and norm layers): the rewards and
update of scoring members one by one, up to float rounding (tests/test_population.py:
test_population_batched_es_scores_and_updates_as_member_by_member), at about what plain inference of
the same rows costs (report/NOTES.md, Performance). It holds N copies of the weights and their
noise, so `auto` uses it only for greedy ES on the HF rollout when they fit.
"""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from es_grpo import Context, ESState, noise, rollout
from scale.chunks import chunked_rollout
from scale.decode import FastRollout


def members_together(run: Context, state: ESState, prompts: int, mine: int, mode: str) -> int:
    """How many members one batched decoding scores; 0: one at a time, set in the weights. mode on:
    always; off: never; auto: greedy, the HF rollout of the model's own weights (batched, members
    decode the model as it is, where FastRollout would decode a copy in --rollout-dtype), and the
    stacked weights and eps within 1 GiB or half the free GPU."""
    args, together = run.args, max(1, run.args.rollout_batch // prompts)
    decodes = run.generate in (rollout, chunked_rollout) or isinstance(run.generate, FastRollout)
    if not decodes or mode == "off":
        return 0
    if mode == "on":
        return together
    copied = isinstance(run.generate, FastRollout) and run.generate.decodes_a_copy(run.model)
    if args.es_temperature > 0 or together == 1 or copied:
        return 0
    first = state.members[0]
    stacked = min(together, mine) * sum(p.numel() * (p.element_size() + 4) for p in state.members)
    free = torch.cuda.mem_get_info(first.device)[0] / 2 if first.device.type == "cuda" else 2**30
    return together if stacked <= free else 0


def decode_as_is(generate: Callable) -> Callable:
    """The generate hook as the population needs it: the model as it is (its layers patched), every
    row on its own (rows of one prompt hold different members' weights, so none is shared)."""
    return generate.as_is if isinstance(generate, FastRollout) else generate


def population_forward(model, state: ESState, seeds: list[int], sigma: float, drawn: dict,
                       source=noise):
    """A context inside which row block n of every batch runs with member n's weights
    master + sigma * eps_n, as set_weights builds them (batched_layers: NotImplementedError for a
    layer it cannot batch), eps from source (es_grpo.noise's contract). Each eps is kept in
    drawn[seed, index] for the update."""
    stacked = {}  # shared by tied layers
    def members(i: int, param: torch.Tensor) -> torch.Tensor:  # (N, *shape) of params[i]
        if i not in stacked:
            for seed in seeds:
                drawn[seed, i] = source(seed, i, param)
            base = state.master[i].to(param.device)
            stacked[i] = torch.stack([(base + sigma * drawn[seed, i]).to(param.dtype)
                                      for seed in seeds])
        return stacked[i]
    return batched_layers(model, state.members, members, len(seeds))

@contextlib.contextmanager
def batched_layers(model, params: list[torch.Tensor], members: Callable, count: int):
    """Inside, a batch of count * R rows runs row block n with member n's weights, members(i,
    params[i]): (count, *shape). Linear, Embedding and norm (weight * f(x)) layers are patched;
    another layer with weights raises NotImplementedError. On leaving, every layer has its class's
    forward again."""
    index = {id(p): i for i, p in enumerate(params)}
    stacked = lambda param: members(index[id(param)], param)  # (N, *shape)
    patched = []
    try:
        for layer in model.modules():
            own = dict(layer.named_parameters(recurse=False))
            if not own:
                continue
            if isinstance(layer, torch.nn.Linear):
                layer.forward = batched_linear(layer, stacked, count)
            elif isinstance(layer, torch.nn.Embedding):
                layer.forward = batched_embedding(stacked(layer.weight), count)
            elif own.keys() == {"weight"} and own["weight"].dim() == 1:
                layer.forward = batched_norm(layer, stacked(layer.weight), count)
            else:
                raise NotImplementedError(f"no batched form for {type(layer).__name__}")
            patched.append(layer)
        yield
    finally:
        for layer in patched:
            del layer.forward  # back to the class's forward

def by_member(x: torch.Tensor, count: int) -> torch.Tensor:  # (N * R, ..., d) -> (N, R * ..., d)
    return x.reshape(count, -1, x.shape[-1])

def batched_linear(layer, stacked: Callable, count: int):
    weight, bias = stacked(layer.weight), None if layer.bias is None else stacked(layer.bias)
    def forward(x):  # x: (N * R, L, in)
        out = torch.bmm(by_member(x, count), weight.transpose(1, 2))  # (N, R * L, out)
        return (out if bias is None else out + bias[:, None]).reshape(*x.shape[:-1], -1)
    return forward

def batched_embedding(weight: torch.Tensor, count: int):  # weight: (N, V, d)
    def forward(ids):  # ids: (N * R, L)
        member = torch.arange(count, device=ids.device).repeat_interleave(ids.shape[0] // count)
        return weight[member[:, None], ids]  # (N * R, L, d)
    return forward

def batched_norm(layer, weight: torch.Tensor, count: int):  # weight: (N, d)
    unit = copy.deepcopy(layer)
    unit.weight.data.fill_(1.0)  # unit(x) = f(x)
    probe = torch.randn(2, layer.weight.shape[0], device=layer.weight.device,
                        dtype=layer.weight.dtype)
    if not torch.equal(layer(probe), layer.weight * unit(probe)):  # Gemma's (1 + weight) * f(x)
        raise NotImplementedError(f"{type(layer).__name__} is not weight * f(x)")
    def forward(x):  # x: (N * R, L, d)
        return (weight[:, None] * by_member(unit(x), count)).reshape(x.shape)
    return forward

