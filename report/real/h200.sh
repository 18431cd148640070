#!/usr/bin/env bash
# The real model's runs on one lent GPU (an H200, about eight minutes): every schedule of the headline at once,
# each run its own `python -m scale.train` process (six), since decoding a 135M model is bound by kernel launches, not
# by the GPU. Runs still going at the deadline are stopped; their trajectory points (metrics.jsonl) stay.
#
#   bash report/real/h200.sh MODEL RUNS SECONDS     # e.g. models/SmolLM2-135M-Instruct report/real/runs 480
#   DEVICE=cpu SMALL="--eval-problems 4 ..." RUNS="es-alpha0.001-s0 grpo-lr1e-05-s0" bash report/real/h200.sh \
#       models/SmolLM2-135M-Instruct /tmp/runs 600     # some of them, small, on a CPU (tests/test_real_model.py)
#
# Budgets as report/REPORT.md defines them, for S = 18 (analyses/reproduction/plan.py, schedules): GRPO 2S = 36
# steps, GRPO->ES S (9 + 9), ES and the null ES S/2 + S/2 x 128/512 = 12 updates (as many sequences as
# GRPO->ES). Batches are the paper's shape, smaller: ES N = 16 (claim 6: larger models need smaller
# populations) x 32 prompts, GRPO 16 prompts x 8. Rates were chosen before any evaluation, none tuned: the GRPO
# frontier spans 3e-6..3e-5 around the pilot's 1e-5 (report/NOTES.md); ES at 4x the paper's alpha 2.5e-4 (sigma
# 1.5e-3, the paper's), since 12 updates at the paper's alpha move a model by about a sixtieth of its 234 steps.
set -u
(($# == 3)) || { echo "usage: h200.sh MODEL RUNS SECONDS" >&2; exit 2; }
model=$1; runs=$2; seconds=$3
mkdir -p "$runs"
common=(--preset paper --model "$model" --task add --device "${DEVICE:-cuda}" --max-new-tokens 128 --rollout-batch 1024
        --eval-split test --eval-problems 100 --eval-samples 64 --heldout-problems 50 --trajectory-samples 32
        --es-population 16 --es-prompts 32 --grpo-prompts 16 --grpo-group 8 --grpo-microbatch 32
        --es-batched on --save-every 0 --seed 0)
declare -A flags=(
  [grpo-lr3e-06-s0]="--algo grpo --steps 36 --grpo-lr 3e-6 --eval-every 6"
  [grpo-lr1e-05-s0]="--algo grpo --steps 36 --grpo-lr 1e-5 --eval-every 6"
  [grpo-lr3e-05-s0]="--algo grpo --steps 36 --grpo-lr 3e-5 --eval-every 6"
  [es-alpha0.001-s0]="--algo es --steps 12 --es-alpha 1e-3 --eval-every 3"
  [es-null-alpha0.001-s0]="--algo es --steps 12 --es-alpha 1e-3 --es-null --eval-every 3"
  [grpo-es-s0]="--algo grpo-es --steps 18 --grpo-lr 1e-5 --es-alpha 1e-3 --eval-every 3"
)
export OMP_NUM_THREADS=2 PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
pids=()
for name in ${RUNS:-${!flags[@]}}; do
  # shellcheck disable=SC2086  # the run's own flags split on spaces
  python3 -m scale.train "${common[@]}" ${flags[$name]} ${SMALL:-} --out "$runs/$name" > "$runs/$name.log" 2>&1 &
  pids+=($!)
done
end=$((SECONDS + seconds))
while ((SECONDS < end)) && jobs -r | grep -q .; do sleep 2; done
for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
wait
echo "h200.sh: stopped after ${SECONDS}s"
