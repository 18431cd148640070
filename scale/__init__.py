"""The machinery of scale, added to es_grpo.py through the hooks of its Context (`generate`,
`ranks`, `es_weights`, `score_members`, `grpo_step`, `folder`, `problems`, `grade`, `es_update`),
built in one place (assembly.py) from the settings (config.py). What each hook becomes:
- `generate`: rollouts in chunks (chunks.py), the fast HF decoder (decode.py, decode_step.py) or
  vLLM's engine (vllm_rollout.py);
- `ranks`: torchrun process groups, DDP and FSDP2 for GRPO and weight-agreement checks
  (distributed.py); `grpo_step`: micro-batches and shared prompts (grpo.py);
- `score_members`, `es_update`: one ES engine (es.py): each member's noise drawn once or read
  from a table, members decoded in one batch (population.py);
- `folder`: run folders with checkpoints, --resume and locks (runs.py), live trackers
  (tracking.py); `problems`: JSONL files and reasoning-gym's tasks (config.py, gym.py); `grade`:
  math-verify bounded in any thread (verifier.py).
The entry point is train.py; its tools are the real model offline (real_model.py), memory
arithmetic (memory.py), benchmarks (bench/) and the GPU check (gpu_check.py). Run from the
repository's root: `python -m scale.train ...` (one process) or
`torchrun --nproc_per_node=8 -m scale.train ...`, `python -m scale.memory`, `python -m scale.bench`,
`python -m scale.gpu_check`. es_grpo.py imports none of it.
"""
