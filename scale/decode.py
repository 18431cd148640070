"""Fast decoding on the HF path: es_grpo.rollout with its cache in reserved room, prompts run once
and weights in a lower precision; run()'s `generate` hook of `python -m scale.train --rollout hf`.

Where a decode step of a 135M model went (report/NOTES.md, "Real-size speed"), and what this does:
- the cache grew by torch.cat: each step copied every layer's keys and values into new memory, so
  steps slowed as the cache grew. Here each layer writes into room reserved for the whole rollout
  (ReservedLayer).
- the prompt's pass computed logits over the 49k-token vocabulary at every prompt position; here at
  the last one only (logits_to_keep).
- SDPA's CPU kernel has a large fixed cost a call at one query token; here two grouped matmuls
  (scale/decode_step.py's decode_attention).
- a new token ran through the model's forward, a product for each projection: for Llama-family
  models it takes scale/decode_step.py's step instead (the forward's numbers, bit for bit on the
  models tested), the model's own pieces with the query-key-value and gate-up projections each one
  packed product (PackedLinears.joined).
- every row ran its whole prompt: here identical prompts run once (GRPO's groups, evaluation's
  samples), and the prefix all prompts share (a chat template's system turn) once (PromptLayout).
- float32 weights: FastRollout(dtype) decodes a copy in that dtype, refreshed whenever the model's
  weights change, while ES's master and GRPO's AdamW stay float32.
- rows that had ended kept decoding (pad tokens) until the batch's last row ended: here a row leaves
  the batch once it has fed an end id, the cache compacted when a quarter of its rows have ended
  (ReservedDecoder.drop_ended); token_steps still gets a (B, V) row for it, which it masks.
The rest is es_grpo.rollout's own code: seeded noise by row, stops, log-probs and entropy over the
full vocabulary in float32. Sharing changes only how keys and values are computed, up to float
rounding (tests/test_decode.py: the same tokens as es_grpo.rollout on the tiny model).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
from functools import partial
from types import SimpleNamespace

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from es_grpo import Rollout, Sampling, cache_argument, eos_ids, rollout
from scale import decode_step
from scale.chunks import chunked_rollout
from scale.decode_step import decode_attention

ATTENTION = "es_grpo_decode"  # the attention implementation a rollout here runs with
# the cache drops its ended rows once at most this share of them is still decoding
KEEP_SHARE = 0.75


class FastRollout:
    """es_grpo.rollout's contract (run()'s generate hook), in chunks of sampling.batch_size rows as
    scale/chunks.py cuts them, decoded as this module says. dtype: the weights' precision while
    decoding ("model": the model's own); stepped: new tokens through scale/decode_step.py where it
    fits the model (False: the model's forward, as scale.bench compares them)."""

    def __init__(self, dtype: str = "model", stepped: bool = True):
        self.dtype, self.stepped = dtype, stepped
        self.copies = {}  # id(model) -> (its copy in dtype, the weights' versions it was made from)
        self.packs = PackedLinears()

    def __call__(self, model, tokenizer, prompts: list[str], sampling: Sampling = Sampling(),
                 first_row: int = 0, total_rows: int | None = None) -> Rollout:
        decoder = self.in_dtype(model)
        with self.packs.linears(decoder, min(len(prompts), sampling.batch_size)):
            step = partial(decode_step.step, joined=self.packs.joined) if self.stepped else None
            return chunked_rollout(decoder, tokenizer, prompts, sampling, first_row, total_rows,
                                   decode=partial(fast_rollout, share=True, step=step))

    def as_is(self, model, tokenizer, prompts, sampling=Sampling(), first_row=0, total_rows=None):
        """The model exactly as it is (its dtype, layers patched by scale/population.py), every row
        on its own: the population's row blocks hold different members' weights."""
        return chunked_rollout(model, tokenizer, prompts, sampling, first_row, total_rows,
                               decode=partial(fast_rollout, share=False))

    def decodes_a_copy(self, model) -> bool:
        """Whether model is decoded through a copy in another dtype (self.dtype), not as it is."""
        dtype = getattr(torch, self.dtype, None)
        return dtype is not None and next(model.parameters()).dtype != dtype

    def in_dtype(self, model):
        """model, or its copy in self.dtype, made equal to model's weights if they changed."""
        if not self.decodes_a_copy(model):
            return model
        dtype, params = getattr(torch, self.dtype), list(model.parameters())
        now = versions(params)
        copied, seen = self.copies.get(id(model), (None, None))
        if copied is None:
            copied = copy.deepcopy(model).to(dtype).eval().requires_grad_(False)
        if seen != now:
            with torch.no_grad():
                for mine, theirs in zip(copied.parameters(), params):
                    mine.copy_(theirs)
        self.copies = {id(model): (copied, now)}  # one model's copy at a time
        return copied


class PackedLinears:
    """The model's Linear layers on oneDNN's prepacked weights while decoding, where that gives the
    same numbers: bfloat16 and float16 weights on a CPU with instructions for them (prepacked, a
    product runs faster there, bit for bit the same; float32 would differ by rounding). A layer's
    pack is made again when its weight changes (an ES member, a GRPO step) and held between
    rollouts."""

    def __init__(self):
        # id(layer) -> (the weight's version, its pack); (id(module), names) -> (the weights'
        # versions, their joined product)
        self.packed = {}
        self.active, self.rows = set(), 0  # the packed layers of the rollout under way

    @contextlib.contextmanager
    def linears(self, model, rows: int):
        packable = {torch.bfloat16: cpu_has_bfloat16(),
                    torch.float16: torch.backends.mkldnn.is_available()
                    # oneDNN raises where the CPU has no such unit
                    and torch.ops.mkldnn._is_mkldnn_fp16_supported()}
        layers = [layer for layer in model.modules() if isinstance(layer, torch.nn.Linear)
                  and "forward" not in vars(layer) and layer.weight.device.type == "cpu"
                  and packable.get(layer.weight.dtype, False)]
        try:
            for layer in layers:
                layer.forward = partial(packed_linear, self.pack(layer, rows), layer.bias)
            self.active, self.rows = {id(layer) for layer in layers}, rows
            yield
        finally:
            self.active = set()
            for layer in layers:
                vars(layer).pop("forward", None)  # the class's forward again

    def pack(self, layer, rows: int) -> torch.Tensor:
        version = versions([layer.weight])
        seen, packed = self.packed.get(id(layer), (None, None))
        if seen != version:
            packed = torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach(), rows)
            self.packed[id(layer)] = (version, packed)
        return packed

    def joined(self, module, names: tuple[str, ...]):
        """module's named Linear layers as one packed product, x -> their outputs side by side (one
        pass over their weights), where each is packed for the rollout under way and their biases
        alike; else None. Made again when one of their weights changes."""
        layers = [getattr(module, name) for name in names]
        if not all(id(layer) in self.active for layer in layers) or len(
                {layer.bias is None for layer in layers}) > 1:
            return None
        version = versions([p for layer in layers for p in (layer.weight, layer.bias)
                            if p is not None])
        seen, product = self.packed.get((id(module), names), (None, None))
        if seen != version:
            weight = torch.cat([layer.weight.detach() for layer in layers])
            bias = None if layers[0].bias is None else torch.cat(
                [layer.bias.detach() for layer in layers])
            product = partial(packed_linear,
                              torch.ops.mkldnn._reorder_linear_weight(weight, self.rows), bias)
            self.packed[(id(module), names)] = (version, product)
        return product


def versions(tensors) -> list[tuple[int, int]]:
    """Where each tensor lies and how often it was changed in place (torch counts each in-place
    change): what a copy or a pack made from them is checked against."""
    return [(tensor.data_ptr(), tensor._version) for tensor in tensors]


def cpu_has_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16, AMX). Without, oneDNN packs
    no bfloat16 weights and torch's bfloat16 matmuls run far slower than float32's (report/NOTES.md,
    "Real-size speed")."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def packed_linear(packed: torch.Tensor, bias, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [None], "")


def fast_rollout(model, tokenizer, prompts, sampling=Sampling(), first_row=0, total_rows=None,
                 share=True, step=None) -> Rollout:
    """es_grpo.rollout itself, handed a ReservedDecoder in the model's place. Shared (a model whose
    rows are alike) ended rows leave the batch and new tokens take `step` (scale/decode_step.py)
    where it fits the model; the population's row blocks (share=False) must stay and run their
    patched layers."""
    stops = torch.tensor(eos_ids(model, tokenizer), device=model.device) if share else None
    decoder = ReservedDecoder(model, sampling.max_new_tokens, share, stops,
                              step if share and decode_step.fits(model) else None)
    with attention(model, ATTENTION):
        return rollout(decoder, tokenizer, prompts, sampling, first_row, total_rows)


class ReservedLayer(DynamicLayer):
    """A cache layer that writes keys and values into room reserved at its first update for the
    whole rollout, instead of concatenating them into new memory each step; keys and values are
    views of the filled part, (B, H, filled, D)."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room

    def lazy_initialization(self, key_states, value_states):
        batch, heads, _, dim = key_states.shape
        self.buffers = [s.new_empty(batch, heads, self.room,
                                    dim) for s in (key_states, value_states)]
        self.filled, self.device, self.is_initialized = 0, key_states.device, True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.filled + key_states.shape[-2]
        for buffer, states in zip(self.buffers, (key_states, value_states)):
            buffer[:, :, self.filled:end] = states
        self.filled = end
        return self.views()

    def views(self):
        self.keys, self.values = (buffer[:, :, :self.filled] for buffer in self.buffers)
        return self.keys, self.values

    def batch_repeat_interleave(self, repeats: int):  # one row (the shared prefix) to every row
        self.batch_select_indices(torch.arange(len(self.buffers[0])).repeat_interleave(repeats))

    def batch_select_indices(self, indices: torch.Tensor):
        if self.is_initialized:
            self.buffers = [buffer[indices.to(self.device)] for buffer in self.buffers]
            self.views()


@dataclasses.dataclass
class PromptLayout:
    """A batch's prompts as they are run: the prefix all rows share once, then each distinct
    prompt's rest (left-padded), then rows gathered from those. A row's tokens keep their positions,
    so its keys and values are those of its whole prompt run alone, up to float rounding."""
    prefix: torch.Tensor  # (1, c) the tokens every prompt begins with (c may be 0)
    rest: torch.Tensor  # (U, S) each distinct prompt after the prefix, left-padded
    rest_mask: torch.Tensor  # (U, S)
    rows: torch.Tensor  # (B,) which distinct prompt each row is

    @classmethod
    def of(cls, ids: torch.Tensor, mask: torch.Tensor, pad_id: int, share: bool) -> PromptLayout:
        """From a left-padded batch, ids and mask (B, P); share=False: every row its own, no
        prefix."""
        prompts = [tuple(row[m.bool()].tolist()) for row, m in zip(ids, mask)]
        distinct = list(dict.fromkeys(prompts)) if share else prompts
        index = {prompt: i for i, prompt in enumerate(distinct)}
        rows = torch.tensor([index[p] for p in prompts] if share else range(len(prompts)))
        common = 0  # the prefix's length: every prompt keeps at least one token of its own
        if share:
            shortest = min(map(len, distinct)) - 1
            while common < shortest and len({p[common] for p in distinct}) == 1:
                common += 1
        width = max(len(p) - common for p in distinct)
        rest = torch.full((len(distinct), width), pad_id, dtype=ids.dtype)
        rest_mask = torch.zeros(len(distinct), width, dtype=mask.dtype)
        for i, prompt in enumerate(distinct):
            tail = prompt[common:]
            rest[i, width - len(tail):], rest_mask[i, width - len(tail):] = torch.tensor(tail), 1
        return cls(torch.tensor([distinct[0][:common]], dtype=ids.dtype, device=ids.device),
                   rest.to(ids.device), rest_mask.to(mask.device), rows.to(ids.device))


class ReservedDecoder:
    """What es_grpo.token_steps calls as its model: model(input_ids, attention_mask, position_ids,
    use_cache, cache).logits (B, 1, V), the next token's only. Its first call runs the prompts as
    PromptLayout lays them out, later calls a token a step, into ReservedLayers (the cache
    token_steps passes is left unused); rows keep es_grpo's positions, the mask is the layout's.
    Parameters and configs are the model's. stops: the end ids (None: every row decodes to the end);
    a row that has fed one gets zero logits, which token_steps masks. step: how a new token runs
    (scale/decode_step.py's step; None: the model's forward)."""

    def __init__(self, model, max_new_tokens: int, share: bool, stops: torch.Tensor | None = None,
                 step=None):
        self.model, self.max_new_tokens, self.share, self.stops, self.step = (
            model, max_new_tokens, share, stops, step)
        self.config, self.generation_config = model.config, model.generation_config
        # rows: (R,) the batch rows the cache holds
        self.cache = self.mask = self.rows = self.ended = None
        self.keep = "logits_to_keep" in inspect.signature(model.forward).parameters

    def parameters(self):
        return self.model.parameters()

    def __call__(self, input_ids, attention_mask, position_ids, use_cache=True, cache=None):
        if self.cache is None:
            logits = self.prompts(input_ids, attention_mask)
            self.rows = torch.arange(len(logits), device=logits.device)
            self.ended = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
            return SimpleNamespace(logits=logits[:, None])  # (B, 1, V)
        self.drop_ended(input_ids[:, 0])
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], 1)  # (R, c + S + t)
        inputs, positions = input_ids[self.rows], position_ids[self.rows]
        logits = (self.step(self.model, inputs, self.mask, positions, self.cache) if self.step
                  else self.logits(inputs, self.mask, positions))  # (R, V)
        if len(self.rows) < len(input_ids):
            logits = logits.new_zeros(len(input_ids),
                                      logits.shape[-1]).index_copy_(0, self.rows, logits)
        return SimpleNamespace(logits=logits[:, None])  # (B, 1, V)

    def drop_ended(self, tokens: torch.Tensor):
        """Marks the rows whose input (B,) is an end id; once at most KEEP_SHARE of the cache's rows
        are still decoding, the cache keeps those alone (a copy of it: fresh memory is slow to fill
        here)."""
        if self.stops is None:
            return
        self.ended |= torch.isin(tokens, self.stops)
        # (r,) cache positions still decoding
        going = (~self.ended[self.rows]).nonzero().squeeze(-1)
        if 0 < len(going) <= KEEP_SHARE * len(self.rows):
            self.cache.batch_select_indices(going)
            self.mask, self.rows = self.mask[going], self.rows[going]

    forward = __call__  # es_grpo.cache_argument reads its signature

    def logits(self, inputs, mask, positions) -> torch.Tensor:  # (B, V) at each row's last position
        kept = {"logits_to_keep": 1} if self.keep else {}
        out = self.model(input_ids=inputs, attention_mask=mask, position_ids=positions,
                         use_cache=True, **{cache_argument(self.model): self.cache}, **kept)
        return out.logits[:, -1]

    def prompts(self, ids, mask) -> torch.Tensor:
        pad = int(ids[mask == 0][0]) if (mask == 0).any() else 0
        layout = PromptLayout.of(ids, mask, pad, self.share)
        common, width = layout.prefix.shape[1], layout.rest.shape[1]
        self.cache = reserved_cache(self.model, common + width + self.max_new_tokens)
        if common:  # the shared prefix once, then its keys and values to every distinct prompt
            self.logits(layout.prefix, torch.ones_like(layout.prefix),
                        torch.arange(common, device=ids.device)[None])
            self.cache.batch_repeat_interleave(len(layout.rest))
        joined = torch.cat([torch.ones(len(layout.rest), common, dtype=mask.dtype,
                                       device=mask.device), layout.rest_mask], 1)  # (U, c + S)
        # (U, S) as in the whole prompt
        positions = (joined.cumsum(-1) - 1).clamp(min=0)[:, common:]
        logits = self.logits(layout.rest, joined, positions)  # (U, V)
        self.cache.batch_select_indices(layout.rows)
        self.mask = joined[layout.rows]  # (B, c + S)
        return logits[layout.rows]


def reserved_cache(model, room: int) -> DynamicCache:
    """A DynamicCache whose full-attention layers are ReservedLayers of `room` positions (a sliding
    window's layers stay as transformers makes them)."""
    cache = DynamicCache(config=model.config)
    cache.layers = [ReservedLayer(room) if type(layer) is DynamicLayer else layer
                    for layer in cache.layers]
    return cache


AttentionInterface.register(ATTENTION, decode_attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)


@contextlib.contextmanager
def attention(model, name: str):
    """The model runs with attention implementation `name` inside, with its own again after."""
    before = model.config._attn_implementation
    if before != "sdpa":  # eager, flash and others keep their own
        yield
        return
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
