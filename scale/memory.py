"""Computed (not measured) memory per GPU for ES and GRPO, Qwen2.5-1.5B and -7B-Instruct; the check
that scale/train.py makes before it starts a vLLM engine beside the trainer.

    python -m scale.memory            # the tables in scale/README.md; no download (configs below)
    python -m scale.memory 2          # the same with GRPO micro-batches of 2 rows

Parameter counts are exact: the models are built on the meta device from their published configs.
The rest is arithmetic, per rank, with es_grpo's paper preset: 64 prompts per ES member, 64 x 8 GRPO
samples shared out among the ranks, prompts of about 256 tokens and 1024 new tokens, AdamW, a frozen
reference model for the KL term; with --grpo-fsdp the rank keeps the whole weights for rollouts and
1/ranks of the trained weights, gradients, AdamW moments and reference, plus two decoder layers made
whole at a time. Activations use the usual estimate of 34 bytes x hidden per token and layer at 16
bits (doubled in float32) plus the full-vocabulary logits, log-softmax and probabilities that
token_logprobs keeps.

With --rollout vllm the trainer no longer decodes (no KV cache of its own), and ES runs inside the
engine (scale/vllm_rollout.py: es_weights): the trainer's model stays in host memory beside the fp32
master, and a member costs the GPU eps and master + sigma * eps of one tensor at a time, plus the
whole member staged in the engine's dtype (bf16 here) until its one reload. On a CPU the engine's KV
cache is VLLM_CPU_KVCACHE_SPACE GiB of host RAM (cpu_engine_kv), not a share of a GPU.
"""
from __future__ import annotations

import argparse
import math
import os

import torch
from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config

from scale.config import PRESETS

MODELS = {  # from the hub's config.json of each model
    "Qwen2.5-1.5B-Instruct": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                  num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                  tie_word_embeddings=True),
    "Qwen2.5-7B-Instruct": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                tie_word_embeddings=False),
}
PAPER = PRESETS["paper"]
GB, PROMPT_TOKENS = 2**30, 256  # prompts of about 256 tokens
MARGIN_GB = 2.0  # CUDA context, allocator fragmentation
ENGINE_WORKSPACE_GB = 2.0  # vLLM's activations and CUDA graphs beside its weights and KV pool


def estimate(config, ranks: int = 8, microbatch: int = 4, preset: dict = PAPER,
             grpo_bytes: int = 4) -> dict:
    """GB per GPU (2^30 bytes) for the model of `config` (a transformers config) under `preset`'s
    settings."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    largest = max(p.numel() for p in model.parameters())
    text = config.get_text_config()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    tokens = PROMPT_TOKENS + preset["max_new_tokens"]
    kv_per_token = text.num_hidden_layers * 2 * kv_heads * head_dim  # elements
    es = {}
    for dtype, size in (("bf16", 2), ("fp32", 4)):
        es[dtype] = (params * size                        # the weights being perturbed
                     # noise and master + sigma * eps of the largest tensor
                     + 2 * largest * 4
                     # KV cache, one member's prompts
                     + preset["es_prompts"] * tokens * kv_per_token * size
                     # one decoding step's logits
                     + 3 * preset["es_prompts"] * text.vocab_size * 4) / GB
    rows = preset["grpo_prompts"] * preset["grpo_group"] // ranks
    # weights, gradients, AdamW's two moments, reference model
    grpo_states = params * 5 * grpo_bytes
    activations = microbatch * tokens * (text.num_hidden_layers * text.hidden_size * 34
                                         * grpo_bytes // 2
                                         + 3 * text.vocab_size * 4)
    # the HF rollout's KV cache for this rank's rows
    hf_kv = rows * tokens * kv_per_token * grpo_bytes
    layers = getattr(getattr(model, "model", model), "layers", None)
    layer = sum(p.numel() for p
                in layers[0].parameters()) if layers else params // text.num_hidden_layers
    fsdp_states = params * grpo_bytes + grpo_states / ranks + 2 * layer * grpo_bytes
    return {"params_B": params / 1e9, "es_bf16": es["bf16"], "es_fp32": es["fp32"],
            "es_host_master": params * 4 / GB,
            "grpo_fp32": (grpo_states + max(activations, hf_kv)) / GB,
            "grpo_states": grpo_states / GB, "grpo_activations": activations / GB,
            "grpo_fsdp": (fsdp_states + max(activations, hf_kv)) / GB,
            "grpo_fsdp_states": fsdp_states / GB,
            # --rollout vllm: what the trainer holds on the GPU beside the engine, and the engine's
            # own weights
            "es_vllm_trainer": (2 * largest * 4 + params * 2) / GB,  # a member staged in bf16 too
            "grpo_vllm_trainer": (grpo_states + activations) / GB,
            "grpo_fsdp_vllm_trainer": (fsdp_states + activations) / GB,
            "engine_bf16": params * 2 / GB,
            "engine_fp32": params * 4 / GB, "kv_per_sequence_bf16": tokens * kv_per_token * 2 / GB,
            "kv_per_token_bf16": kv_per_token * 2 / GB,
            # vLLM's startup profile: one forward of the whole token batch (one layer's MLP and
            # attention
            # activations at a time), and the sampler's fp32 logits and probabilities for every
            # sequence
            "profile_per_token_bf16": (2 * text.intermediate_size + 4 * text.hidden_size) * 2 / GB,
            "profile_per_sequence": 2 * text.vocab_size * 4 / GB}


def trainer_need(estimate_: dict, algo: str, grpo_fsdp: bool) -> float:
    """GB the trainer holds on each GPU beside a vLLM engine: GRPO's states and activations if the
    schedule has a GRPO stage (its model then stays on the GPU through ES stages too), else ES's
    temporaries."""
    if "grpo" not in algo.split("-"):
        return estimate_["es_vllm_trainer"]
    return estimate_["grpo_fsdp_vllm_trainer" if grpo_fsdp else "grpo_vllm_trainer"]


def engine_batch(gpu_gb: float, device_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM 0.33.0 picks for LLM(...) by GPU
    (engine/arg_utils.py:2958-3003): 16,384 and 1,024 from 70 GiB (A100s excepted), else 8,192 and
    256. scale/train.py passes them to the engine, so the engine profiles the batch this check
    sized."""
    large = gpu_gb >= 160 or (gpu_gb >= 70 and "a100" not in device_name.lower())
    return (16384, 1024) if large else (8192, 256)


def engine_need(estimate_: dict, dtype: str, max_len: int, batch_tokens: int,
                batch_seqs: int) -> float:
    """GB the engine needs to start, as vLLM's startup checks it: its weights, ENGINE_WORKSPACE_GB,
    the profile of its batch (the larger of batch_tokens and max_len tokens, batch_seqs sequences),
    and a KV cache that holds one whole sequence of max_len tokens
    (v1/core/kv_cache_planning.py:50-86)."""
    size = 2 if dtype == "float32" else 1  # relative to bf16
    profile = (max(batch_tokens, max_len) * estimate_["profile_per_token_bf16"] * size
               + batch_seqs * estimate_["profile_per_sequence"])
    return (estimate_["engine_fp32" if dtype == "float32" else "engine_bf16"] + ENGINE_WORKSPACE_GB
            + profile
            + max_len * estimate_["kv_per_token_bf16"] * size)


def engine_share(trainer_gb: float, engine_min_gb: float, gpu_gb: float,
                 asked: float = 0.0) -> float:
    """The share of the GPU for vLLM's gpu_memory_utilization: `asked` if given, else all that the
    trainer and MARGIN_GB leave (at most 0.9). Raises ValueError, saying what does not fit, when the
    engine would get less than engine_min_gb or the trainer less than it needs."""
    share = asked or min(0.9, (gpu_gb - trainer_gb - MARGIN_GB) / gpu_gb)
    if share * gpu_gb < engine_min_gb:
        raise ValueError(f"the engine would get {max(share, 0) * gpu_gb:.1f} of this GPU's "
                         f"{gpu_gb:.0f} GB, less "
                         f"than the {engine_min_gb:.1f} GB it needs to start (weights, its "
                         f"profiling batch and one "
                         f"whole sequence; the trainer needs {trainer_gb:.1f} GB)")
    # (the computed share meets it exactly)
    if trainer_gb + MARGIN_GB > (1 - share) * gpu_gb + 1e-6:
        raise ValueError(f"--vllm-memory {share:g} leaves {(1 - share) * gpu_gb:.1f} of this GPU's "
                         f"{gpu_gb:.0f} GB "
                         f"to the trainer, which needs {trainer_gb:.1f} GB (+{MARGIN_GB:g}); at "
                         f"most {(gpu_gb - trainer_gb - MARGIN_GB) / gpu_gb:.2f}")
    return share


def cpu_engine_kv(estimate_: dict, dtype: str, max_len: int, trainer_gb: float, ranks: int = 1,
                  kv_gib: int | None = None, available_gb: float | None = None) -> int:
    """GiB of host RAM for a CPU engine's KV cache (vLLM's VLLM_CPU_KVCACHE_SPACE; unset, vLLM takes
    half the machine's RAM): kv_gib if given, else the least whole GiB that holds one sequence of
    max_len tokens. Raises ValueError, saying what does not fit, when it holds no whole sequence
    (vLLM would refuse to start) or when `ranks` engines' weights and caches beside as many trainers
    exceed available_gb (default: the RAM available now)."""
    size = 2 if dtype == "float32" else 1  # relative to bf16
    sequence = max_len * estimate_["kv_per_token_bf16"] * size
    kv = kv_gib or max(1, math.ceil(sequence))
    if kv < sequence:
        raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={kv} GiB holds less than one sequence of "
                         f"{max_len} tokens ({sequence:.2f} GiB)")
    weights = estimate_["engine_fp32" if dtype == "float32" else "engine_bf16"]
    available = available_ram_gb() if available_gb is None else available_gb
    if ranks * (weights + kv + trainer_gb) > available:
        raise ValueError(f"{ranks} CPU engine(s) of {weights:.1f} GB of weights and {kv} GiB of KV "
                         f"cache, each "
                         f"beside a trainer of {trainer_gb:.1f} GB, need more than the "
                         f"{available:.1f} GB of RAM available")
    return kv


def available_ram_gb() -> float:
    """MemAvailable from /proc/meminfo (Linux), else the free physical pages."""
    try:
        with open("/proc/meminfo") as meminfo:
            return next(int(line.split()[1]) * 1024 for line in meminfo
                        if line.startswith("MemAvailable")) / GB
    except (OSError, StopIteration):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GB


def config_of(model: str):
    """A local folder's or hub id's transformers config (the hub needs network)."""
    return AutoConfig.from_pretrained(model)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scale.memory",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("microbatch", nargs="?", type=int, default=4,
                        help="GRPO micro-batch, rows per forward pass (--grpo-microbatch; default "
                             "4)")
    microbatch = parser.parse_args(argv).microbatch
    if microbatch < 1:
        parser.error("the micro-batch must be at least 1 row")
    print(f"Computed, not measured; GB = 2^30 bytes, per GPU, 8 ranks, GRPO micro-batch "
          f"{microbatch} rows (--grpo-microbatch {microbatch})\n")
    print("HF rollout:\n")
    print("| model | parameters | ES, bf16 weights | ES, fp32 weights | ES master copy (host RAM, "
          "per rank) "
          "| GRPO, fp32 + AdamW + reference | of which states | of which activations | GRPO with "
          "--grpo-fsdp | of which states |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    estimates = {name: estimate(Qwen2Config(**fields), microbatch=microbatch)
                 for name, fields in MODELS.items()}
    for name, e in estimates.items():
        print(f"| {name} | {e['params_B']:.2f}B | {e['es_bf16']:.1f} | {e['es_fp32']:.1f} | "
              f"{e['es_host_master']:.1f} "
              f"| {e['grpo_fp32']:.1f} | {e['grpo_states']:.1f} | {e['grpo_activations']:.1f} "
              f"| {e['grpo_fsdp']:.1f} | {e['grpo_fsdp_states']:.1f} |")
    print("\n--rollout vllm, an 80 GB GPU (74.5 GB of 2^30 bytes), the engine in bf16:\n")
    print("| model | engine weights | ES: trainer on the GPU | ES: engine share | GRPO: trainer | "
          "GRPO: engine share | GRPO --grpo-fsdp: trainer | engine share |")
    print("|---|---|---|---|---|---|---|---|")
    gpu = 80e9 / GB
    for name, e in estimates.items():
        cells = []
        engine_min = engine_need(e, "bfloat16", PROMPT_TOKENS + PAPER["max_new_tokens"],
                                 *engine_batch(gpu, "H100"))
        for need in (e["es_vllm_trainer"], e["grpo_vllm_trainer"], e["grpo_fsdp_vllm_trainer"]):
            try:
                share = f"{engine_share(need, engine_min, gpu):.2f}"
            except ValueError:
                share = "does not fit"
            cells += [f"{need:.1f}", share]
        print(f"| {name} | {e['engine_bf16']:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
