#!/usr/bin/env bash
# Model parallelism through `braid launch` on this host: a small char
# transformer trained for a few steps by 4 processes under several meshes
# (data x pipeline, tensor x pipeline, data x tensor), each over the
# transport given. Every run must finish, print its plan and a finite loss;
# a single process then resumes the sharded checkpoint (merging the shards).
# usage: model_parallel_launch.sh BRAID_BINARY CONFIG TRANSPORT
set -euo pipefail
braid=$1
config=$2
transport=$3
out=$(mktemp -d /tmp/braid-mp-launch.XXXXXX)
trap 'rm -rf "$out"' EXIT
small=(--set model.d_model=32 --set model.n_heads=4 --set model.n_layers=2 --set model.dropout=0
       --set train.batch_size=8 --set train.max_steps=12 --set train.eval_every=0 --set train.log_every=4
       --set train.threads=1 --set train.progress=lines --set parallel.transport="$transport")
check() {  # check NAME: the log shows the plan and a finite final loss
  local log="$out/$1.log"
  grep -q "plan: " "$log" || { cat "$log"; echo "FAIL: $1 printed no plan"; exit 1; }
  grep -Eq "final train loss [0-9]+\.[0-9]+" "$log" || { cat "$log"; echo "FAIL: $1 has no finite final loss"; exit 1; }
  echo "ok: $1: $(grep -o 'plan: [^;]*' "$log" | head -1), $(grep -o 'final train loss [0-9.]*' "$log" | head -1)"
}
run() {  # run NAME KEY=VALUE...
  local name=$1; shift
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  timeout 300 "$braid" launch -n 4 -- "$braid" train "$config" "${small[@]}" "${sets[@]}" \
    --set train.out_dir="$out/$name" >"$out/$name.log" 2>&1 || { cat "$out/$name.log"; echo "FAIL: $name"; exit 1; }
  check "$name"
}
run dp2_pp2 parallel.data=2 parallel.pipeline=2 parallel.microbatches=2 parallel.schedule=1f1b
run tp2_pp2 parallel.tensor=2 parallel.pipeline=2 parallel.microbatches=2 parallel.schedule=gpipe
run dp2_tp2 parallel.tensor=2
# One process continues the tensor x pipeline run from its four shards.
timeout 300 "$braid" train "$config" "${small[@]}" --set parallel.transport=auto --set train.max_steps=14 \
  --set train.resume=always --set train.out_dir="$out/tp2_pp2" >"$out/merge.log" 2>&1 ||
  { cat "$out/merge.log"; echo "FAIL: one process could not resume the sharded run"; exit 1; }
grep -q "merged the 4 shards of step 12" "$out/merge.log" || { cat "$out/merge.log"; echo "FAIL: no merge"; exit 1; }
echo "ok: one process merged the 4 shards and went on"
