#!/usr/bin/env bash
# Fault test: kill -9 rank 1 of a 2-rank run after a checkpoint.
# `braid launch --max-restarts 1` restarts the group, which resumes from the
# last checkpoint, finishes the epoch, and ends within 0.5 points of test
# accuracy of the same run left alone. By default the run is data parallel
# (allreduce); extra --set arguments change the plan, e.g. a two-stage
# pipeline, whose checkpoints live in a shard folder (CKPT_DIR).
# usage: kill_restart.sh BRAID_BINARY CONFIG [CKPT_DIR [KEY=VALUE ...]]
set -euo pipefail
braid=$1
config=$2
ckpt_dir=${3:-}
shift $(( $# < 3 ? $# : 3 ))
extra=()
for kv in "$@"; do extra+=(--set "$kv"); done
out=$(mktemp -d /tmp/braid-kill-restart.XXXXXX)
trap 'rm -rf "$out"' EXIT

run() {  # run NAME [launch options]: one epoch of the 2-rank job
  local name=$1; shift
  "$braid" launch -n 2 "$@" -- "$braid" train "$config" \
    --set parallel.strategy=allreduce --set train.epochs=1 --set train.checkpoint_every=100 \
    --set train.resume=auto --set train.out_dir="$out/$name" --set train.progress=lines \
    --set train.log_every=50 --set train.threads=1 "${extra[@]}" --summary-json "$out/$name.json" >"$out/$name.log" 2>&1
}
top1() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['eval']['top1'])" "$1"; }

run alone || { cat "$out/alone.log"; echo "FAIL: the uninterrupted run failed"; exit 1; }

run killed --max-restarts 1 &
launcher=$!
# Wait (bounded) for the second checkpoint, then kill rank 1.
ckpt="$out/killed/${ckpt_dir:+$ckpt_dir/}ckpt-00000200.json"
for _ in $(seq 1 600); do
  ls "$ckpt" >/dev/null 2>&1 && break
  sleep 0.1
done
ls "$ckpt" >/dev/null 2>&1 || { echo "no checkpoint appeared"; cat "$out/killed.log"; kill "$launcher"; exit 1; }
killed=0
for pid in $(pgrep -f -- "train.out_dir=$out/killed" || true); do
  if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx 'RANK=1'; then
    kill -9 "$pid" && killed=1
  fi
done
[[ $killed == 1 ]] || { echo "rank 1 not found"; cat "$out/killed.log"; kill "$launcher"; exit 1; }

status=0
timeout 300 tail --pid="$launcher" -f /dev/null || true
wait "$launcher" || status=$?
cat "$out/killed.log"
[[ $status == 0 ]] || { echo "FAIL: launcher exited with $status"; exit 1; }
grep -q "resumed from" "$out/killed.log" || { echo "FAIL: the restarted group did not resume"; exit 1; }
a=$(top1 "$out/alone.json") b=$(top1 "$out/killed.json")
python3 -c "import sys; sys.exit(0 if abs($a - $b) <= 0.005 else 1)" ||
  { echo "FAIL: top-1 $b after the restart vs $a without (more than 0.5 points apart)"; exit 1; }
echo "PASS: killed rank 1, the group restarted and resumed; top-1 $b vs $a uninterrupted"
