#!/usr/bin/env bash
# Fault test: kill -9 one worker of a 2-rank allreduce run after its first
# checkpoint. `braid launch --max-restarts 1` restarts the group, which resumes
# from the last checkpoint and finishes all steps.
# usage: kill_restart.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-kill-restart.XXXXXX)
trap 'rm -rf "$out"' EXIT

"$braid" launch -n 2 --max-restarts 1 -- "$braid" train "$config" \
  --set parallel.strategy=allreduce --set train.max_steps=60 --set train.checkpoint_every=10 \
  --set train.resume=true --set train.out_dir="$out/run" --set train.progress=lines \
  --set train.log_every=10 --set train.eval_every=0 --set train.threads=1 >"$out/log" 2>&1 &
launcher=$!

# Wait (bounded) for the first checkpoint, then kill rank 1.
for _ in $(seq 1 600); do
  ls "$out"/run/*.json >/dev/null 2>&1 && break
  sleep 0.1
done
ls "$out"/run/*.json >/dev/null 2>&1 || { echo "no checkpoint appeared"; cat "$out/log"; kill "$launcher"; exit 1; }
killed=0
for pid in $(pgrep -f -- "train.out_dir=$out/run" || true); do
  if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx 'RANK=1'; then
    kill -9 "$pid" && killed=1
  fi
done
[[ $killed == 1 ]] || { echo "rank 1 not found"; cat "$out/log"; kill "$launcher"; exit 1; }

status=0
timeout 300 tail --pid="$launcher" -f /dev/null || true
wait "$launcher" || status=$?
cat "$out/log"
[[ $status == 0 ]] || { echo "FAIL: launcher exited with $status"; exit 1; }
grep -q "resumed from" "$out/log" || { echo "FAIL: the restarted group did not resume"; exit 1; }
grep -q "ckpt-00000060" "$out/log" || { echo "FAIL: the run did not reach step 60"; exit 1; }
echo "PASS: killed rank 1, the group restarted, resumed and finished"
