#!/usr/bin/env bash
# ZeRO through `braid launch`, and one run continued under other plans from
# the same checkpoint folder: 2 processes at stage 2, then 3 at stage 3, then
# one process without ZeRO, then 4 as data 2 x tensor 2 at stage 1 (the
# whole checkpoint cut into tensor-parallel shards), then 2 as a two-stage
# pipeline (those shards merged and cut again), then one process again. Each
# run must resume from the step the previous one reached and finish with a
# finite loss.
# usage: zero_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-zero-launch.XXXXXX)
trap 'rm -rf "$out"' EXIT
small=(--set model.d_model=32 --set model.n_heads=4 --set model.n_layers=2 --set model.dropout=0
       --set train.batch_size=8 --set train.eval_every=0 --set train.log_every=2 --set train.threads=1
       --set train.progress=lines --set train.checkpoint_every=2 --set train.out_dir="$out/run")
step=0
run() {  # run NAME PROCESSES MAX_STEPS KEY=VALUE...
  local name=$1 n=$2 steps=$3; shift 3
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  local cmd=("$braid" train "$config" "${small[@]}" --set train.max_steps="$steps" --set train.resume=auto "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1 || { cat "$out/$name.log"; echo "FAIL: $name"; exit 1; }
  local log="$out/$name.log"
  if [ "$step" -gt 0 ]; then
    grep -q "resumed from .*(step $step," "$log" || { cat "$log"; echo "FAIL: $name did not resume from step $step"; exit 1; }
  fi
  grep -Eq "final train loss [0-9]+\.[0-9]+" "$log" || { cat "$log"; echo "FAIL: $name has no finite final loss"; exit 1; }
  echo "ok: $name: $(grep -Eo 'merged the [0-9]+ shards of step [0-9]+|resharded step [0-9]+' "$log" | head -1)," \
       "$(grep -o 'grad sync [a-z0-9-]*' "$log" | head -1), $(grep -o 'final train loss [0-9.]*' "$log" | head -1)"
  step=$steps
}
run zero2_n2 2 4 parallel.strategy=zero parallel.zero_stage=2
grep -q '"zero"' "$out"/run/ckpt-00000004.json || { echo "FAIL: the checkpoint does not record ZeRO"; exit 1; }
run zero3_n3 3 6 parallel.strategy=zero parallel.zero_stage=3
run single 1 8 parallel.strategy=none
run zero1_d2t2 4 10 parallel.strategy=zero parallel.zero_stage=1 parallel.tensor=2
run pp2 2 12 parallel.strategy=auto parallel.pipeline=2 parallel.microbatches=2
# The pipeline's shards are the newest, beside the tensor-parallel run's older ones.
run single_again 1 14 parallel.strategy=none
grep -q "merged the 2 shards of step 12" "$out/single_again.log" || { echo "FAIL: not resumed from the pipeline's shards"; exit 1; }
"$braid" inspect checkpoint "$out/run" | head -20
