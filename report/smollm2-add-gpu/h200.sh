#!/usr/bin/env bash
# The real model's runs on one lent GPU (an H200, about eight minutes): every claims run of `eval.py reproduce` at
# once, as its --plan lists them, each its own `python -m scale.train` process, since decoding a 135M model is bound
# by kernel launches, not by the GPU. Runs still going at the deadline are stopped; their trajectory points
# (metrics.jsonl) stay, for `eval.py trajectories`. The command it prints last finishes them (anywhere with the
# same --device) and writes the whole report: `eval.py reproduce` reuses the finished runs in OUT/runs.
#
#   bash report/smollm2-add-gpu/h200.sh MODEL OUT SECONDS     # e.g. models/SmolLM2-135M-Instruct report/smollm2-add-gpu 505
#   DEVICE=cpu SMALL="--eval-problems 4 ..." RUNS="es-s0 grpo-s0" bash report/smollm2-add-gpu/h200.sh \
#       models/SmolLM2-135M-Instruct /tmp/real 600     # some of them, small, on a CPU (tests/test_real_model.py)
#
# SMALL: flags added to the design (every run's, and the printed reproduce command's); RUNS: the plan's runs to
# launch (all if unset); LAUNCH: scale.train's own flags for each run (default --es-batched on --save-every 0).
# ONE_AT_A_TIME=1 is for a machine that cannot run them together (a CPU, over several sessions): the runs go one
# after another, each checkpointed after every update; a finished run is skipped and a begun one resumed
# (--resume, with the flags it was launched with); the first run with a base evaluation lends it to the runs of
# its seed that start later (--base-from; BASE_FROM names another lender): it is the same for all of them.
# At the deadline the running one is stopped; the same command goes on from its last checkpoint.
#   DEVICE=cpu SMALL="--grpo-autocast --rollout-dtype bfloat16" LAUNCH="--es-batched off" ONE_AT_A_TIME=1 \
#       bash report/smollm2-add-gpu/h200.sh models/SmolLM2-135M-Instruct report/smollm2-add-cpu 9000   # report/NOTES.md
#
# Budgets as report/REPORT.md defines them, for S = 18 (analyses/reproduction/plan.py, schedules): GRPO 2S = 36
# steps, GRPO->ES S (9 + 9), ES and the null ES S/2 + S/2 x 128/512 = 12 updates (as many sequences as
# GRPO->ES). Batches are the paper's shape, smaller: ES N = 16 (claim 6: larger models need smaller
# populations) x 32 prompts, GRPO 16 prompts x 8. Rates were chosen before any evaluation, none tuned: GRPO's
# 1e-5 from the pilot (report/NOTES.md) and a frontier of 3e-6 and 3e-5 around it; ES at 4x the paper's alpha
# 2.5e-4 (sigma 1.5e-3, the paper's), since 12 updates at the paper's alpha move a model by about a sixtieth
# of its 234 steps. report/smollm2-add-gpu/runs were made by this script's first form, the same runs named by their rates.
# MODEL and OUT are paths without spaces (the plan's lines are split on them).
set -u
(($# == 3)) || { echo "usage: h200.sh MODEL OUT SECONDS" >&2; exit 2; }
model=$1; out=$2; seconds=$3
[[ $seconds =~ ^[0-9]+$ ]] || { echo "h200.sh: SECONDS is a whole number of seconds, not '$seconds'" >&2; exit 2; }
design=(--out "$out" --preset paper --model "$model" --task add --device "${DEVICE:-cuda}" --max-new-tokens 128
        --rollout-batch 1024 --eval-split test --eval-problems 100 --heldout-problems 50 --es-population 16
        --es-prompts 32 --grpo-prompts 16 --grpo-group 8 --grpo-microbatch 32 --grpo-lr 1e-5 --es-alpha 1e-3
        --seeds 0 --steps 18 --samples 64 --frontier-lrs 3e-6,3e-5 --frontier-alphas "" --parts claims)
# shellcheck disable=SC2086  # SMALL's flags split on spaces
design+=(${SMALL:-})
plan=$(python3 eval.py reproduce "${design[@]}" --plan) || exit 2
mkdir -p "$out/runs"
export OMP_NUM_THREADS=2 PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
# shellcheck disable=SC2206  # LAUNCH's flags split on spaces
launch=(${LAUNCH:---es-batched on --save-every 0})
end=$((SECONDS + seconds))
chosen() { [[ -z ${RUNS:-} || " $RUNS " == *" $1 "* ]]; }
lender() {  # a run of the plan with $1's seed (its name's -sSEED) whose base evaluation is on disk, or BASE_FROM
  local folder
  [[ -n ${BASE_FROM:-} ]] && { echo "$BASE_FROM"; return; }
  for folder in "${folders[@]}"; do
    [[ ${folder##*-s} == "${1##*-s}" && ( -f $folder/summary.json || -f $folder/checkpoint.pt ) ]] &&
      { echo "$folder"; return; }
  done
}
folders=()
while read -r line; do folders+=("${line##*--out }"); done <<< "$plan"
if [[ -n ${ONE_AT_A_TIME:-} ]]; then
  while read -r line; do
    folder=${line##*--out }; name=${folder##*/}
    chosen "$name" && ((SECONDS < end)) && [[ ! -f $folder/summary.json ]] || continue
    if [[ -f $folder/config.json ]]; then
      command=(--resume "$folder")
    else
      base=$(lender "$folder")
      # shellcheck disable=SC2086  # the plan's flags split on spaces
      command=($line "${launch[@]}" --save-every 1 ${base:+--base-from "$base"})
    fi
    python3 -m scale.train "${command[@]}" >> "$out/runs/$name.log" 2>&1 &
    pid=$!
    while ((SECONDS < end)) && kill -0 "$pid" 2>/dev/null; do sleep 2; done
    kill "$pid" 2>/dev/null
    wait "$pid" || echo "h200.sh: $name stopped (exit $?), its log: $out/runs/$name.log" >&2
  done <<< "$plan"
else
  pids=()
  while read -r line; do
    name=${line##*/}
    chosen "$name" || continue
    # shellcheck disable=SC2086  # the plan's flags split on spaces
    python3 -m scale.train $line "${launch[@]}" > "$out/runs/$name.log" 2>&1 &
    pids+=($!)
  done <<< "$plan"
  while ((SECONDS < end)) && jobs -r | grep -q .; do sleep 2; done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait
fi
echo "h200.sh: stopped after ${SECONDS}s; the whole report: python eval.py reproduce $(printf '%q ' "${design[@]}")"
