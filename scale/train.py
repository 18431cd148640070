"""ES and GRPO on full-size models over many GPUs: es_grpo.py under torchrun, with vLLM rollouts if asked.

    torchrun --nproc_per_node=8 scale/train.py --model Qwen/Qwen2.5-1.5B-Instruct --data gsm8k_train.jsonl \\
        --algo es --preset paper --rollout vllm
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 --rdzv-id=run1 \\
        scale/train.py ...                         # the same command on every node
    torchrun --nproc_per_node=2 scale/train.py --algo es --steps 4    # CPU, gloo, the shipped tiny model

All of the algorithm is es_grpo.py: ES ranks split the population by seed and exchange scores, GRPO ranks
split the prompts under DDP, every rank checks that all hold the same weights (es_grpo.py, "distributed").
This file adds the choice of rollout engine. See scale/README.md for the recipes and memory.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import es_grpo  # noqa: E402
from es_grpo import dataclass_parser, flag  # noqa: E402


@dataclass
class ScaleArgs:
    """What scale/train.py adds to the flags of es_grpo.py (python es_grpo.py --help lists those)."""

    rollout: str = flag("hf", "rollout engine: hf (es_grpo.rollout, transformers) or vllm (one engine per rank)")
    vllm_memory: float = flag(0.5, "share of GPU memory vLLM may take; the rest holds the trainer's model and optimizer")
    vllm_max_len: int = flag(0, "vLLM max_model_len, prompt plus completion (0: the model's own)")


def main(argv=None):
    parser = dataclass_parser(ScaleArgs, "scale/train.py", epilog="Every other flag is es_grpo.py's.")
    scale, rest = parser.parse_known_args(argv)
    if scale.rollout not in ("hf", "vllm"):
        parser.error(f"--rollout: unknown {scale.rollout!r} (choose from hf, vllm)")
    if not 0 < scale.vllm_memory < 1:
        parser.error("--vllm-memory must be in (0, 1)")
    args = es_grpo.parse_args(rest)
    generate = es_grpo.rollout
    if scale.rollout == "vllm":
        from vllm_rollout import VLLMRollout

        saved = vars(args)
        if args.resume:  # the engine serves the model the run was started with
            try:
                saved = json.loads((Path(args.resume) / "config.json").read_text())
            except (OSError, ValueError):
                pass  # es_grpo.run reports the unreadable run folder
        generate = VLLMRollout.launch(saved["model"] or str(es_grpo.TINY_MODEL), saved["dtype"], scale.vllm_memory,
                                      scale.vllm_max_len, saved["seed"])
    es_grpo.run(args, generate)


if __name__ == "__main__":
    main()
