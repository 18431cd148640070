"""ES and GRPO on full-size models over many GPUs: es_grpo.run under torchrun, with vLLM rollouts if asked.

    torchrun --nproc_per_node=8 scale/train.py --model Qwen/Qwen2.5-1.5B-Instruct --data gsm8k_train.jsonl \\
        --algo es --preset paper --rollout vllm
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 --rdzv-id=run1 \\
        scale/train.py ...                         # the same command on every node
    torchrun --nproc_per_node=2 scale/train.py --algo es --steps 4    # CPU, gloo, the shipped tiny model
    torchrun --nproc_per_node=2 scale/train.py --resume runs/es-s0     # its scale flags come from the run folder

All of the algorithm is es_grpo.py; this file picks its two hooks: `ranks` (scale/distributed.py: process
groups, DDP or FSDP for GRPO, weight-agreement checks) and `generate` (es_grpo.rollout, or vLLM). Its own
flags are saved in the run folder's config.json, so --resume continues with them. See scale/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import es_grpo  # noqa: E402
import memory  # noqa: E402
from distributed import Torchrun  # noqa: E402
from es_grpo import dataclass_parser, flag  # noqa: E402


@dataclass
class ScaleArgs:
    """What scale/train.py adds to the flags of es_grpo.py (python es_grpo.py --help lists those)."""

    rollout: str = flag("hf", "rollout engine: hf (es_grpo.rollout, transformers) or vllm (one engine per rank)",
                        ("hf", "vllm"))
    vllm_memory: float = flag(0.0, "share of GPU memory vLLM may take; the rest holds the trainer (0: all that "
                                   "the trainer leaves by scale/memory.py's arithmetic, at most 0.9)")
    vllm_dtype: str = flag("auto", "the engine's weights (auto: --dtype for ES alone, so that members are the "
                                   "transformers path's; bfloat16 when a GRPO stage runs)",
                           ("auto", "float32", "bfloat16", "float16"))
    vllm_max_len: int = flag(0, "vLLM max_model_len, prompt plus completion (0: the model's own)")
    grpo_fsdp: bool = flag(False, "shard GRPO's trained weights, gradients, AdamW states and reference over the "
                                  "ranks (FSDP2) instead of DDP; rollouts use a whole copy")
    check_every: int = flag(1, "updates between checks that all ranks hold identical weights (0: at stage ends)")
    dist_timeout: int = flag(600, "seconds a rank waits for the others before it gives up")


def saved_config(argv: list[str]) -> dict | None:
    """The config.json of the run folder that --resume names, if any and readable (es_grpo.run reports the rest)."""
    resume = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    resume.add_argument("--resume", default="")
    folder = resume.parse_known_args(argv)[0].resume
    try:
        return json.loads((Path(folder) / "config.json").read_text()) if folder else None
    except (OSError, ValueError):
        return None


def vllm_settings(run: dict, scale: ScaleArgs, world: int, gpu_gb: float, model_config) -> tuple[float, str]:
    """(gpu_memory_utilization, dtype) for the engine beside this run's trainer on a GPU of gpu_gb (2^30 bytes),
    by scale/memory.py's arithmetic; ValueError (what does not fit) when both cannot. The engine is created
    before the trainer loads (with external_launcher its creation is a collective), and vLLM takes its share
    at once: so the check is arithmetic, made before anything starts."""
    dtype = scale.vllm_dtype if scale.vllm_dtype != "auto" else "bfloat16" if "grpo" in run["algo"] else run["dtype"]
    rows = run["grpo_prompts"] * run["grpo_group"] // world
    estimate = memory.estimate(model_config, ranks=world, microbatch=run["grpo_microbatch"] or rows, preset=run,
                               grpo_bytes=4 if run["dtype"] == "float32" else 2)
    weights = estimate["engine_fp32" if dtype == "float32" else "engine_bf16"]
    sequence = estimate["kv_per_sequence_bf16"] * (2 if dtype == "float32" else 1)
    trainer = memory.trainer_need(estimate, run["algo"], scale.grpo_fsdp)
    return memory.engine_share(trainer, weights + memory.ENGINE_WORKSPACE_GB + sequence, gpu_gb,
                               scale.vllm_memory), dtype


def main(argv=None, launcher=Torchrun):
    argv = sys.argv[1:] if argv is None else argv
    parser = dataclass_parser(ScaleArgs, "scale/train.py", epilog="Every other flag is es_grpo.py's.",
                              allow_abbrev=False)
    saved = saved_config(argv)
    if saved and saved.get("scale"):
        parser.set_defaults(**saved["scale"])
    scale, rest = parser.parse_known_args(argv)
    args = es_grpo.parse_args(rest)
    config = saved or vars(args)  # the settings this run will actually use
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for bad, message in [
        (not 0 <= scale.vllm_memory < 1, "--vllm-memory must be in [0, 1) (0: computed)"),
        (scale.check_every < 0 or scale.dist_timeout < 1,
         "--check-every must not be negative, --dist-timeout positive"),
        (config["grpo_prompts"] < world, f"--grpo-prompts must be at least the number of ranks ({world})"),
        (scale.grpo_fsdp and config["grpo_prompts"] % world,  # else ranks make different numbers of sharded passes
         f"--grpo-fsdp needs --grpo-prompts divisible by the number of ranks ({world})")]:
        if bad:
            parser.error(message)
    generate = es_grpo.rollout
    if scale.rollout == "vllm":
        from vllm_rollout import VLLMRollout

        model = config["model"] or str(es_grpo.TINY_MODEL)
        share, dtype = scale.vllm_memory or 0.5, scale.vllm_dtype  # no GPU here: vLLM refuses to start anyway
        if torch.cuda.is_available():
            gpu_gb = torch.cuda.get_device_properties(int(os.environ.get("LOCAL_RANK", "0"))).total_memory / memory.GB
            try:
                share, dtype = vllm_settings(config, scale, world, gpu_gb, memory.config_of(model))
            except ValueError as err:
                parser.error(f"--rollout vllm: {err}; try --grpo-fsdp, a smaller --grpo-microbatch, --vllm-memory "
                             "or --rollout hf")
        generate = VLLMRollout.launch(model, dtype, share, scale.vllm_max_len, config["seed"])
    in_engine_es = scale.rollout == "vllm" and config["algo"] == "es"  # the model is then only saved
    ranks = launcher(scale.grpo_fsdp, scale.check_every, scale.dist_timeout, config=vars(scale),
                     engine=generate if scale.rollout == "vllm" else None, model_device="cpu" if in_engine_es else None)
    return es_grpo.run(args, generate, ranks)


if __name__ == "__main__":
    main()
