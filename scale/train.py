"""ES and GRPO on full-size models over many GPUs: es_grpo.run under torchrun, with vLLM rollouts
if asked.

    torchrun --nproc_per_node=8 -m scale.train --model Qwen/Qwen2.5-1.5B-Instruct \\
        --data gsm8k_train.jsonl --algo es --preset paper --rollout vllm
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \\
        --rdzv-id=run1 -m scale.train ...                            # the same on every node
    torchrun --nproc_per_node=2 -m scale.train --algo es --steps 4   # CPU, gloo, the tiny model
    torchrun --nproc_per_node=2 -m scale.train --resume runs/es-s0   # every flag: the run folder's

All of the algorithm is es_grpo.py; scale/assembly.py fills its hooks from these flags: `ranks`
(scale/distributed.py: process groups, DDP or FSDP for GRPO, weight-agreement checks), `generate`
(es_grpo.rollout's speed layers, or vLLM), `es_weights` (ES inside the vLLM engine), `score_members`
(scale/es.py: the ES population, its eps drawn once) and `grade` (scale/verifier.py). This file
parses and checks the flags (scale/config.py's Args) and sizes the vLLM engine. Every flag is saved
in the run folder's config.json, so --resume continues with them. On one process (python -m
scale.train, no torchrun) it is es_grpo.py with those layers. See scale/README.md.
"""
from __future__ import annotations

import os

import torch
from transformers import AutoTokenizer

import es_grpo
from scale import assembly, memory, tracking
from scale.config import Args, evaluation_sets, parse_args
from scale.decode import cpu_has_bfloat16
from scale.distributed import Torchrun
# vLLM itself: only when an engine starts
from scale.vllm_rollout import EngineSettings, VLLMRollout


def engine_length(args: Args, tokenizer) -> int:
    """max_model_len for the run: its longest prompt (training, evaluation and held-out problems, in
    the tokenizer's tokens, as the engine receives them) plus --max-new-tokens."""
    train, evaluation, heldout = evaluation_sets(args, tokenizer)
    problems = [*train, *evaluation, *(p for family in heldout.values() for p in family)]
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    ids = tokenizer(prompts, add_special_tokens=tokenizer.chat_template is None)["input_ids"]
    return max(map(len, ids)) + args.max_new_tokens


def engine_dtype(args: Args) -> str:
    return (args.vllm_dtype if args.vllm_dtype != "auto"
            else "bfloat16" if "grpo" in args.algo else args.dtype)


def engine_settings(args: Args, world: int, gpu: tuple[float, str], model_config,
                    max_len: int) -> EngineSettings:
    """The engine beside this run's trainer on a GPU of gpu[0] GB (2^30 bytes) named gpu[1], by
    scale/memory.py's arithmetic, which mirrors vLLM's startup conditions (a KV cache for one whole
    sequence of max_len, the profile of its batch); ValueError (what does not fit) when trainer and
    engine cannot share the GPU. The engine is created before the trainer loads (with
    external_launcher its creation is a collective) and vLLM takes its share at once, so the check
    is arithmetic, made before anything starts."""
    dtype, run = engine_dtype(args), vars(args)
    rows = args.grpo_prompts * args.grpo_group // world
    estimate = memory.estimate(model_config, ranks=world,
                               microbatch=args.grpo_microbatch or rows, preset=run,
                               grpo_bytes=4 if args.dtype == "float32" else 2)
    longest = getattr(model_config.get_text_config(), "max_position_embeddings", None)
    if longest and max_len > longest:
        raise ValueError(f"prompt plus completion is {max_len} tokens, more than the model's "
                         f"{longest}")
    batch = memory.engine_batch(*gpu)
    need = memory.engine_need(estimate, dtype, max_len, *batch)
    share = memory.engine_share(memory.trainer_need(estimate, args.algo, args.grpo_fsdp), need,
                                gpu[0], args.vllm_memory)
    return EngineSettings(args.model or str(es_grpo.TINY_MODEL), dtype, share, max_len, *batch,
                          args.seed, args.dist_timeout)


def vllm_engine(parser, args: Args, world: int) -> EngineSettings:
    """The engine's settings, or a one-line refusal naming the flags, before any engine starts. On a
    CPU (vLLM's CPU build) the engine's KV cache is VLLM_CPU_KVCACHE_SPACE GiB of host RAM: set
    here, if unset, to what one whole sequence needs (at least 1 GiB), and checked against the RAM
    available."""
    model, config = args.model or str(es_grpo.TINY_MODEL), vars(args)
    max_len = args.vllm_max_len or engine_length(args, AutoTokenizer.from_pretrained(model))
    dtype = engine_dtype(args)
    try:
        if not torch.cuda.is_available():
            rows = args.grpo_prompts * args.grpo_group // world
            estimate = memory.estimate(memory.config_of(model), ranks=world, preset=config,
                                       microbatch=args.grpo_microbatch or rows)
            trainer = (estimate["es_host_master"] * 2 if "grpo" not in args.algo
                       else estimate["grpo_fp32"])
            space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
            if space and not space.isdigit():
                raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={space!r} is not a whole number of GiB")
            kv = memory.cpu_engine_kv(estimate, dtype, max_len, trainer, world,
                                      int(space) if space else None)
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(kv)
            return EngineSettings(model, dtype, args.vllm_memory or 0.5, max_len, 8192, 256,
                                  args.seed, args.dist_timeout)
        device = int(os.environ.get("LOCAL_RANK", "0"))
        gpu = (torch.cuda.get_device_properties(device).total_memory / memory.GB,
               torch.cuda.get_device_name(device))
        return engine_settings(args, world, gpu, memory.config_of(model), max_len)
    except ValueError as err:
        parser.error(f"--rollout vllm: {err}; try --grpo-fsdp, a smaller --grpo-microbatch, "
                     "--vllm-memory, --vllm-max-len, --max-new-tokens, VLLM_CPU_KVCACHE_SPACE "
                     "(CPU) or --rollout hf")


def main(argv=None, launcher=Torchrun):
    args = parse_args(argv, "scale.train")  # with --resume: the run folder's saved settings
    parser = es_grpo.OneLineErrors(prog="scale.train")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    untracked = tracking.missing(args.report_to)  # before an engine starts: the assembly's check
    for bad, message in [
        (bool(untracked), untracked),
        (not 0 <= args.vllm_memory < 1, "--vllm-memory must be in [0, 1) (0: computed)"),
        (args.es_batched == "on" and args.es_temperature > 0,
         "--es-batched on needs --es-temperature 0"),
        (args.save_every < 0, "--save-every must not be negative"),
        (args.rollout != "hf" and args.rollout_dtype != "model",
         "--rollout-dtype is the HF path's (--rollout hf); an engine's weights: --vllm-dtype"),
        (args.es_noise == "table" and (world > 1 or args.rollout == "vllm"),
         "--es-noise table runs on one process, not inside a vLLM engine"),
        (args.check_every < 0 or args.dist_timeout < 1,
         "--check-every must not be negative, --dist-timeout positive"),
        (args.grpo_prompts < world,
         f"--grpo-prompts must be at least the number of ranks ({world})"),
        # else ranks make different numbers of sharded passes
        (args.grpo_fsdp and args.grpo_prompts % world,
         f"--grpo-fsdp needs --grpo-prompts divisible by the number of ranks ({world})")]:
        if bad:
            parser.error(message)
    low = "bfloat16" in (args.rollout_dtype, args.dtype) or args.grpo_autocast
    if low and args.rollout == "hf" and not torch.cuda.is_available() and not cpu_has_bfloat16():
        es_grpo.log("scale.train: this CPU has no bfloat16 instructions (AVX-512 BF16, AMX): its "
                    "bfloat16 matmuls run far slower than float32's; float32 is faster here "
                    "(docs/real-model.md)")
    vllm = args.rollout == "vllm"
    engine = VLLMRollout.launch(vllm_engine(parser, args, world)) if vllm else None
    return es_grpo.run(args, **assembly.hooks(args, engine, launcher))


if __name__ == "__main__":
    main()
