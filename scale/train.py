"""ES and GRPO on full-size models over many GPUs: es_grpo.run under torchrun, with vLLM rollouts
if asked.

    torchrun --nproc_per_node=8 -m scale.train --model Qwen/Qwen2.5-1.5B-Instruct \\
        --data gsm8k_train.jsonl --algo es --preset paper --rollout vllm
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \\
        --rdzv-id=run1 -m scale.train ...                            # the same on every node
    torchrun --nproc_per_node=2 -m scale.train --algo es --steps 4   # CPU, gloo, the tiny model
    torchrun --nproc_per_node=2 -m scale.train --resume runs/es-s0   # scale flags: the run folder's

All of the algorithm is es_grpo.py; scale/assembly.py fills its hooks from these flags: `ranks`
(scale/distributed.py: process groups, DDP or FSDP for GRPO, weight-agreement checks), `generate`
(es_grpo.rollout's speed layers, or vLLM), `es_weights` (ES inside the vLLM engine), `score_members`
(scale/es.py: the ES population, its eps drawn once) and `grade` (scale/verifier.py). This file
parses and checks the flags and sizes the vLLM engine. Its own flags are saved in the run folder's
config.json, so --resume continues with them. On one process (python -m scale.train, no torchrun) it
is es_grpo.py with those layers. See scale/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields
from pathlib import Path

import torch
from transformers import AutoTokenizer

import es_grpo
from es_grpo import dataclass_parser
from scale import assembly, memory, tracking
from scale.assembly import ScaleArgs
from scale.config import Args, evaluation_sets, own_flags, parse_args, saved_settings
from scale.decode import cpu_has_bfloat16
from scale.distributed import Torchrun
from scale.runs import refuse_resume
# vLLM itself: only when an engine starts
from scale.vllm_rollout import EngineSettings, VLLMRollout


def saved_config(argv: list[str]) -> dict | None:
    """The config.json of the run folder that --resume names, if any and readable (es_grpo.run
    reports the rest)."""
    resume = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    resume.add_argument("--resume", default="")
    folder = resume.parse_known_args(argv)[0].resume
    try:
        saved = saved_settings(json.loads((Path(folder)
                                           / "config.json").read_text())) if folder else None
    except (OSError, ValueError):
        return None
    if saved is not None:
        refuse_resume(Path(folder), saved)
    return saved


def settings_of(config: dict) -> Args:
    """The run's settings as Args, from the flags or the saved config.json (which holds more)."""
    return Args(**{k: v for k, v in config.items() if k in Args.__dataclass_fields__})


def engine_length(args: Args, tokenizer) -> int:
    """max_model_len for the run: its longest prompt (training, evaluation and held-out problems, in
    the tokenizer's tokens, as the engine receives them) plus --max-new-tokens."""
    train, evaluation, heldout = evaluation_sets(args, tokenizer)
    problems = [*train, *evaluation, *(p for family in heldout.values() for p in family)]
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    ids = tokenizer(prompts, add_special_tokens=tokenizer.chat_template is None)["input_ids"]
    return max(map(len, ids)) + args.max_new_tokens


def engine_dtype(run: dict, scale: ScaleArgs) -> str:
    return (scale.vllm_dtype if scale.vllm_dtype != "auto"
            else "bfloat16" if "grpo" in run["algo"] else run["dtype"])


def engine_settings(run: dict, scale: ScaleArgs, world: int, gpu: tuple[float, str], model_config,
                    max_len: int) -> EngineSettings:
    """The engine beside this run's trainer on a GPU of gpu[0] GB (2^30 bytes) named gpu[1], by
    scale/memory.py's arithmetic, which mirrors vLLM's startup conditions (a KV cache for one whole
    sequence of max_len, the profile of its batch); ValueError (what does not fit) when trainer and
    engine cannot share the GPU. The engine is created before the trainer loads (with
    external_launcher its creation is a collective) and vLLM takes its share at once, so the check
    is arithmetic, made before anything starts."""
    dtype = engine_dtype(run, scale)
    rows = run["grpo_prompts"] * run["grpo_group"] // world
    estimate = memory.estimate(model_config, ranks=world,
                               microbatch=run["grpo_microbatch"] or rows, preset=run,
                               grpo_bytes=4 if run["dtype"] == "float32" else 2)
    longest = getattr(model_config.get_text_config(), "max_position_embeddings", None)
    if longest and max_len > longest:
        raise ValueError(f"prompt plus completion is {max_len} tokens, more than the model's "
                         f"{longest}")
    batch = memory.engine_batch(*gpu)
    need = memory.engine_need(estimate, dtype, max_len, *batch)
    share = memory.engine_share(memory.trainer_need(estimate, run["algo"], scale.grpo_fsdp), need,
                                gpu[0], scale.vllm_memory)
    return EngineSettings(run["model"] or str(es_grpo.TINY_MODEL), dtype, share, max_len, *batch,
                          run["seed"], scale.dist_timeout)


def vllm_engine(parser, config: dict, scale: ScaleArgs, world: int) -> EngineSettings:
    """The engine's settings, or a one-line refusal naming the flags, before any engine starts. On a
    CPU (vLLM's CPU build) the engine's KV cache is VLLM_CPU_KVCACHE_SPACE GiB of host RAM: set
    here, if unset, to what one whole sequence needs (at least 1 GiB), and checked against the RAM
    available."""
    model = config["model"] or str(es_grpo.TINY_MODEL)
    args = settings_of(config)
    max_len = scale.vllm_max_len or engine_length(args, AutoTokenizer.from_pretrained(model))
    dtype = engine_dtype(config, scale)
    try:
        if not torch.cuda.is_available():
            rows = config["grpo_prompts"] * config["grpo_group"] // world
            estimate = memory.estimate(memory.config_of(model), ranks=world, preset=config,
                                       microbatch=config["grpo_microbatch"] or rows)
            trainer = (estimate["es_host_master"] * 2 if "grpo" not in config["algo"]
                       else estimate["grpo_fp32"])
            space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
            if space and not space.isdigit():
                raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={space!r} is not a whole number of GiB")
            kv = memory.cpu_engine_kv(estimate, dtype, max_len, trainer, world,
                                      int(space) if space else None)
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(kv)
            return EngineSettings(model, dtype, scale.vllm_memory or 0.5, max_len, 8192, 256,
                                  config["seed"], scale.dist_timeout)
        device = int(os.environ.get("LOCAL_RANK", "0"))
        gpu = (torch.cuda.get_device_properties(device).total_memory / memory.GB,
               torch.cuda.get_device_name(device))
        return engine_settings(config, scale, world, gpu, memory.config_of(model), max_len)
    except ValueError as err:
        parser.error(f"--rollout vllm: {err}; try --grpo-fsdp, a smaller --grpo-microbatch, "
                     f"--vllm-memory, "
                     "--vllm-max-len, --max-new-tokens, VLLM_CPU_KVCACHE_SPACE (CPU) or --rollout "
                     "hf")


def main(argv=None, launcher=Torchrun):
    argv = sys.argv[1:] if argv is None else argv
    parser = dataclass_parser(ScaleArgs, "scale.train", allow_abbrev=False, epilog=(
        "Every other flag is es_grpo.py's (python es_grpo.py --help) or one of scale/config.py's: "
        + ", ".join(own_flags()) + "."))
    saved = saved_config(argv)
    if saved and saved.get("scale"):  # as launched (--rollout-dtype: saved_settings)
        launched = saved["scale"]
        parser.set_defaults(**{f.name: launched[f.name] for f in fields(ScaleArgs) if f.name
                               in launched})
    scale, rest = parser.parse_known_args(argv)
    ignored = [token.split("=")[0] for token in rest if token.startswith("--")]
    if scale.resume and ignored:
        parser.error(f"--resume continues a run with its saved flags: {' '.join(ignored)} would be "
                     f"ignored")
    args = parse_args(rest, "scale.train")
    config = saved or vars(args)  # the settings this run will actually use
    world = int(os.environ.get("WORLD_SIZE", "1"))
    untracked = tracking.missing(scale.report_to)  # before an engine starts: the assembly's check
    for bad, message in [
        (bool(untracked), untracked),
        (not 0 <= scale.vllm_memory < 1, "--vllm-memory must be in [0, 1) (0: computed)"),
        (scale.es_batched == "on" and config["es_temperature"] > 0,
         "--es-batched on needs --es-temperature 0"),
        (scale.save_every < 0, "--save-every must not be negative"),
        (scale.rollout != "hf" and config["rollout_dtype"] != "model",
         "--rollout-dtype is the HF path's (--rollout hf); an engine's weights: --vllm-dtype"),
        (scale.es_noise == "table" and (world > 1 or scale.rollout == "vllm"),
         "--es-noise table runs on one process, not inside a vLLM engine"),
        (scale.check_every < 0 or scale.dist_timeout < 1,
         "--check-every must not be negative, --dist-timeout positive"),
        (config["grpo_prompts"] < world,
         f"--grpo-prompts must be at least the number of ranks ({world})"),
        # else ranks make different numbers of sharded passes
        (scale.grpo_fsdp and config["grpo_prompts"] % world,
         f"--grpo-fsdp needs --grpo-prompts divisible by the number of ranks ({world})")]:
        if bad:
            parser.error(message)
    low = "bfloat16" in (config["rollout_dtype"], config["dtype"]) or config["grpo_autocast"]
    if low and scale.rollout == "hf" and not torch.cuda.is_available() and not cpu_has_bfloat16():
        es_grpo.log("scale.train: this CPU has no bfloat16 instructions (AVX-512 BF16, AMX): its "
                    "bfloat16 "
                    "matmuls run far slower than float32's; float32 is faster here "
                    "(docs/real-model.md)")
    engine = VLLMRollout.launch(vllm_engine(parser, config, scale,
                                            world)) if scale.rollout == "vllm" else None
    return es_grpo.run(args, **assembly.hooks(settings_of(config), scale, engine, launcher))


if __name__ == "__main__":
    main()
