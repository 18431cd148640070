"""The ES population decoded in one batch: es_grpo.run's `score_members` hook.

es_grpo.score_members scores the members one at a time, each set in the model's weights. Here every
member's rows are decoded together, each row block with its member's weights master + sigma * eps_n,
through batched matmuls on stacked weights (embedding, linear and norm layers): the rewards and
update of scoring members one by one, up to float rounding (tests/test_es.py:
test_population_batched_es_scores_and_updates_as_member_by_member), at about what plain inference of
the same rows costs (report/NOTES.md, Performance). It holds N copies of the weights and their
noise, so `auto` uses it only for greedy ES on the HF rollout when they fit.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable

import torch

from es_grpo import (Context, ESState, new_scores, noise, prompt_text, rollout, score_member,
                     score_members)
from scale.chunks import chunked_rollout
from scale.decode import FastRollout

MODES = ("auto", "on", "off")


class PopulationScorer:
    """es_grpo.run's score_members hook, with es_grpo.score_members's contract: (run, state,
    problems, seeds, seed) -> (scores, drawn), every member's reward, tokens and entropy sum (N,)
    and problems solved (N, P), summed over the processes, each of which scores a share of the
    members; drawn: the eps it generated, by (seed, tensor index), which es_update reuses. mode: on,
    off (one at a time, as es_grpo.score_members) or auto (members_together)."""

    def __init__(self, mode: str = "auto", once=None):
        """once: the member-by-member path where it runs on one process (scale/es_noise.py's
        DrawnOnce: each eps drawn once); None: es_grpo.score_members's."""
        self.mode, self.once = mode, once

    def __call__(self, run: Context, state: ESState, problems: list[dict], seeds: list[int],
                 seed: int) -> tuple[dict, dict]:
        mine = run.ranks.share(range(len(seeds)))
        together = members_together(run, state, len(problems), len(mine), self.mode)
        if not together and self.once is not None and run.ranks.world_size == 1:
            return self.once(run, state, problems, seeds, seed)
        if not together:
            return one_at_a_time(run, state, problems, seeds, seed)
        try:
            return self.batched(run, state, problems, seeds, seed, together)
        except NotImplementedError:  # a layer it cannot batch: one member at a time instead
            return one_at_a_time(run, state, problems, seeds, seed)

    @staticmethod
    def batched(run: Context, state: ESState, problems: list[dict], seeds: list[int], seed: int,
                together: int) -> tuple[dict, dict]:
        P, mine, drawn = len(problems), run.ranks.share(range(len(seeds))), {}
        scores, prompts = new_scores(len(seeds),
                                     P), [prompt_text(p, run.tokenizer) for p in problems]
        sampling = run.args.sampling("es", seed)
        for group in [mine[i:i + together] for i in range(0, len(mine), together)]:
            with population_forward(run.model, state, [seeds[m] for m in group], run.args.es_sigma,
                                    drawn):
                roll = decode_as_is(run.generate)(
                    run.model, run.tokenizer, prompts * len(group),
                    dataclasses.replace(sampling, batch_size=len(group) * P))
            for j, member in enumerate(group):
                score_member(run, scores, member, problems, roll.rows(slice(j * P, (j + 1) * P)))
        return run.ranks.sum(scores), drawn  # every process has every member's scores now


def one_at_a_time(run: Context, state: ESState, problems: list[dict], seeds: list[int],
                  seed: int) -> tuple[dict, dict]:
    """es_grpo.score_members on this process's share of the members, the scores summed over
    processes."""
    mine = run.ranks.share(range(len(seeds)))
    part, _ = score_members(run, state, problems, [seeds[member] for member in mine], seed)
    scores = new_scores(len(seeds), len(problems))
    for name, values in part.items():
        scores[name][mine] = values
    return run.ranks.sum(scores), {}  # every process has every member's scores now


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


def population_forward(model, state: ESState, seeds: list[int], sigma: float, drawn: dict):
    """A context inside which row block n of every batch runs with member n's weights
    master + sigma * eps_n, as set_weights builds them (batched_layers: NotImplementedError for a
    layer it cannot batch). Each eps is kept in drawn[seed, index] for es_update."""
    stacked = {}  # shared by tied layers
    def members(i: int, param: torch.Tensor) -> torch.Tensor:  # (N, *shape) of params[i]
        if i not in stacked:
            for seed in seeds:
                drawn[seed, i] = noise(seed, i, param)
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

