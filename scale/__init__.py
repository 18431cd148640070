"""The machinery of scale, added to es_grpo.py through its hooks (`ranks`, `generate`, `es_weights`,
`score_members`, `folder`, and `LATEX` for math answers): the ES population in one batch
(population.py), run folders with checkpoints, --resume and locks (runs.py), math-verify bounded in
any thread (verifier.py), torchrun process groups, DDP and FSDP2 for GRPO, weight-agreement checks
(distributed.py), vLLM rollouts (vllm_rollout.py), the entry point (train.py) and its tools: memory
arithmetic (memory.py), benchmarks (bench.py) and the GPU check (gpu_check.py). Run from the
repository's root: `python -m scale.train ...` (one process) or
`torchrun --nproc_per_node=8 -m scale.train ...`, `python -m scale.memory`, `python -m scale.bench`,
`python -m scale.gpu_check`. es_grpo.py imports none of it.
"""
