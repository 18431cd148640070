"""The ES population in one batch: the machinery behind es_grpo.population_forward.

Every member's rows are decoded together, row block n with member n's weights, by batched matmuls: the rewards
and update of scoring members one by one, up to float rounding (tests/test_es.py:
test_population_batched_es_scores_and_updates_as_member_by_member). es_grpo.py says what a member's weights
are; this module only makes the model's layers use them.
"""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch


@contextlib.contextmanager
def batched_layers(model, params: list[torch.Tensor], members: Callable, count: int):
    """Inside, a batch of count * R rows runs row block n with member n's weights, members(i, params[i]):
    (count, *shape). Linear, Embedding and norm (weight * f(x)) layers are patched; another layer with weights
    raises NotImplementedError. On leaving, every layer has its class's forward again."""
    index = {id(p): i for i, p in enumerate(params)}
    stacked = lambda param: members(index[id(param)], param)  # (N, *shape)
    by_member = lambda x: x.reshape(count, -1, x.shape[-1])  # (N * R, ...) -> (N, R * ..., last)
    def linear(layer):
        weight, bias = stacked(layer.weight), None if layer.bias is None else stacked(layer.bias)
        def forward(x):  # x: (N * R, L, in)
            out = torch.bmm(by_member(x), weight.transpose(1, 2))  # (N, R * L, out)
            return (out if bias is None else out + bias[:, None]).reshape(*x.shape[:-1], -1)
        return forward
    def embedding(layer):
        weight = stacked(layer.weight)  # (N, V, d)
        def forward(ids):  # ids: (N * R, L)
            member = torch.arange(count, device=ids.device).repeat_interleave(ids.shape[0] // count)
            return weight[member[:, None], ids]  # (N * R, L, d)
        return forward
    def norm(layer):
        weight, unit = stacked(layer.weight), copy.deepcopy(layer)
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
