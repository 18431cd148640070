"""Computed (not measured) memory per GPU for ES and GRPO with the HF rollout, Qwen2.5-1.5B and -7B-Instruct.

    python scale/memory.py            # prints the table in scale/README.md; no download (configs below)
    python scale/memory.py 2          # the same with GRPO micro-batches of 2 rows

Parameter counts are exact: the models are built on the meta device from their published configs. The rest
is arithmetic, per rank, with es_grpo's paper preset: 64 prompts per ES member, 64 x 8 GRPO samples shared
out among the ranks, prompts of about 256 tokens and 1024 new tokens, AdamW, a frozen reference model for the
KL term; with --grpo-fsdp the rank keeps the whole weights for rollouts and 1/ranks of the trained weights,
gradients, AdamW moments and reference, plus two decoder layers made whole at a time. Activations use
the usual estimate of 34 bytes x hidden per token and layer at 16 bits (doubled in float32) plus the
full-vocabulary logits, log-softmax and probabilities that token_logprobs keeps.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from es_grpo import PRESETS  # noqa: E402

MODELS = {  # from the hub's config.json of each model
    "Qwen2.5-1.5B-Instruct": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                  num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                  tie_word_embeddings=True),
    "Qwen2.5-7B-Instruct": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                tie_word_embeddings=False),
}
PAPER = PRESETS["paper"]
GB, TOKENS = 2**30, 256 + PAPER["max_new_tokens"]  # prompts of about 256 tokens


def estimate(name: str, ranks: int = 8, microbatch: int = 4) -> dict:
    config = Qwen2Config(**MODELS[name])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    largest = max(p.numel() for p in model.parameters())
    head_dim = config.hidden_size // config.num_attention_heads
    kv_per_row = TOKENS * config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim  # elements
    es = {}
    for dtype, size in (("bf16", 2), ("fp32", 4)):
        es[dtype] = (params * size                        # the weights being perturbed
                     + 2 * largest * 4                     # noise and master + sigma * eps of the largest tensor
                     + PAPER["es_prompts"] * kv_per_row * size  # KV cache, one member's prompts
                     + 3 * PAPER["es_prompts"] * config.vocab_size * 4) / GB  # one decoding step's logits
    rows = PAPER["grpo_prompts"] * PAPER["grpo_group"] // ranks
    grpo_states = params * (4 + 4 + 8 + 4)  # fp32 weights, gradients, AdamW moments, reference model
    activations = microbatch * TOKENS * (config.num_hidden_layers * config.hidden_size * 34 * 2
                                         + 3 * config.vocab_size * 4)
    grpo = (grpo_states + max(activations, rows * kv_per_row * 4)) / GB
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    fsdp_states = params * 4 + grpo_states / ranks + 2 * layer * 4
    fsdp = (fsdp_states + max(activations, rows * kv_per_row * 4)) / GB
    return {"model": name, "params_B": params / 1e9, "es_bf16": es["bf16"], "es_fp32": es["fp32"],
            "es_host_master": params * 4 / GB, "grpo_fp32": grpo, "grpo_states": grpo_states / GB,
            "grpo_activations": activations / GB, "rows": rows,
            "grpo_fsdp": fsdp, "grpo_fsdp_states": fsdp_states / GB}


if __name__ == "__main__":
    microbatch = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    print(f"Computed, not measured; GB = 2^30 bytes, per GPU, 8 ranks, GRPO micro-batch {microbatch} rows "
          f"(--grpo-microbatch {microbatch})\n")
    print("| model | parameters | ES, bf16 weights | ES, fp32 weights | ES master copy (host RAM, per rank) "
          "| GRPO, fp32 + AdamW + reference | of which states | of which activations | GRPO with --grpo-fsdp "
          "| of which states |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in MODELS:
        e = estimate(name, microbatch=microbatch)
        print(f"| {name} | {e['params_B']:.2f}B | {e['es_bf16']:.1f} | {e['es_fp32']:.1f} | {e['es_host_master']:.1f} "
              f"| {e['grpo_fp32']:.1f} | {e['grpo_states']:.1f} | {e['grpo_activations']:.1f} "
              f"| {e['grpo_fsdp']:.1f} | {e['grpo_fsdp_states']:.1f} |")
