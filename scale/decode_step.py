"""A new token's step through a Llama-family model: what scale/decode.py's ReservedDecoder runs for
each token after the prompts' pass (which is the model's own forward).

At 16 rows on a CPU a token's step is bound by its products, one per projection, and the small
operations between them (report/NOTES.md, "Real-size speed"). Here a step runs the model's own
pieces (its norms, rotary embedding, activation and projections, packed where scale/decode.py packs
them), in the forward's order, on (rows, features) tensors, with the mask made once a step; where
the weights are packed, the query, key and value projections, and the gate and up projections, are
one product each (`joined`: one pass over their weights, not three or two). Each row's logits are
the forward's, bit for bit on the models tested (tests/test_decode_step.py).
"""
from __future__ import annotations

import torch
from transformers import LlamaForCausalLM, Qwen2ForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

# models whose decoder layers are Llama's (norm, attention with rotary embedding, gated MLP);
# projections may have biases. Exactly these classes: a subclass may compute otherwise.
KINDS = (LlamaForCausalLM, Qwen2ForCausalLM)


def fits(model) -> bool:
    """Whether step() computes model's forward: a Llama-family model wholly on a CPU, full attention
    in every layer."""
    config = model.config
    return (type(model) in KINDS and not getattr(config, "use_sliding_window", False)
            and all(kind == "full_attention" for kind in getattr(config, "layer_types", None) or [])
            and all(p.device.type == "cpu" for p in model.parameters()))


@torch.no_grad()
def step(model, inputs, mask, positions, cache, joined=None) -> torch.Tensor:
    """The next token's logits (R, V) for inputs (R, 1) at positions (R, 1), attending to the keys
    the cache (scale/decode.py's ReservedLayers) holds and this token's, under mask (R, L) (1: a
    real token). joined(module, names): the named projections of module as one product (None:
    each its own)."""
    body, joined = model.model, joined or (lambda module, names: None)
    hidden = body.embed_tokens.forward(inputs[:, 0])  # (R, E)
    rotary = body.rotary_emb.forward(hidden, positions)  # cos, sin: (R, 1, D) each
    keep = mask.bool()[:, None, None, :]  # (R, 1, 1, L)
    for layer, cached in zip(body.layers, cache.layers):
        attention, mlp = layer.self_attn, layer.mlp
        query, key, value = projections(attention, QKV, joined(attention, QKV),
                                         layer.input_layernorm.forward(hidden))
        mixed = attend(attention, (query, key, value), rotary, keep, cached)
        hidden = hidden + attention.o_proj.forward(mixed)
        gate, up = projections(mlp, GATE_UP, joined(mlp, GATE_UP),
                               layer.post_attention_layernorm.forward(hidden))
        hidden = hidden + mlp.down_proj.forward(mlp.act_fn.forward(gate) * up)
    return model.lm_head.forward(body.norm.forward(hidden))


QKV, GATE_UP = ("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")


def projections(module, names, joined, x) -> list[torch.Tensor]:
    """Each named projection of x (R, E): one product where joined, else one each."""
    if joined is None:
        return [getattr(module, name).forward(x) for name in names]
    return list(joined(x).split([getattr(module, name).out_features for name in names], -1))


def attend(attention, qkv, rotary, keep, cached) -> torch.Tensor:
    """LlamaAttention's forward for one token a row, before its output projection: query, key and
    value projected (R, heads x D each) in, (R, heads x D) out."""
    rows, dim = qkv[0].shape[0], attention.head_dim
    query, key, value = (p.view(rows, -1, 1, dim) for p in qkv)  # (R, heads, 1, D)
    query, key = apply_rotary_pos_emb(query, key, *rotary)
    keys, values = cached.update(key, value)  # (R, Hkv, L, D)
    out, _ = decode_attention(attention, query, keys, values, keep,
                              scaling=attention.scaling)  # (R, 1, H, D)
    return out.view(rows, -1)


def decode_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                     **kwargs):
    """SDPA (transformers' own) for a pass of many query tokens; for one, two grouped matmuls over
    the cache. query (B, H, q, D); key, value (B, Hkv, L, D); attention_mask (B, 1, q, L) bool or
    None. Returns (B, q, H, D), as transformers' attention functions do."""
    batch, heads, length, dim = query.shape
    if length > 1 or dropout or kwargs.get("softcap") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    grouped = query.reshape(batch, key.shape[1], -1, dim)  # (B, Hkv, H / Hkv, D)
    scores = torch.matmul(grouped, key.transpose(-1, -2)).float() * scaling  # (B, Hkv, G, L)
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    out = torch.matmul(scores.softmax(-1).to(value.dtype), value)  # (B, Hkv, G, D)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2), None

