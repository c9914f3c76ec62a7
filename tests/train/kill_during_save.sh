#!/usr/bin/env bash
# kill -9 during asynchronous sharded saves never leaves a checkpoint that
# loads as complete but is not: 20 times, a run that saves every 2 steps
# (train.checkpoint_format = sharded, written in the background) is killed
# at a random instant after its first complete save; a run resumed with
# train.resume = always must then resume from the newest step whose folder
# has a manifest, without passing over any (no "skipping unusable").
# usage: kill_during_save.sh BRAID_BINARY CONFIG [ROUNDS]
set -euo pipefail
braid=$1
config=$2
rounds=${3:-20}
out=$(mktemp -d /tmp/braid-kill-save.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$out/log" 2>/dev/null; exit 1; }
# Weights of 784x1024 + 1024x1024 + ...: about 7 MB a save with SGD's momentum.
common=(--set train.checkpoint_format=sharded --set train.checkpoint_every=2 --set model.hidden=1024
        --set train.threads=1 --set train.eval_every=0 --set train.progress=lines --set train.log_every=1000)

newest_complete() {
  ls -d "$1"/ckpt-*/manifest.json 2>/dev/null | sed -n 's|.*/ckpt-0*\([0-9][0-9]*\)/manifest.json$|\1|p' | sort -n | tail -1
}

for round in $(seq 1 "$rounds"); do
  run="$out/run$round"
  "$braid" train "$config" "${common[@]}" --set train.max_steps=100000 --set train.out_dir="$run" >"$out/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [[ -n "$(newest_complete "$run")" ]] && break
    kill -0 "$pid" 2>/dev/null || fail "round $round: the run ended before its first save"
    sleep 0.05
  done
  [[ -n "$(newest_complete "$run")" ]] || { kill -9 "$pid"; fail "round $round: no complete save within 30 s"; }
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  newest=$(newest_complete "$run")
  partial=$(ls -d "$run"/ckpt-* | wc -l)
  "$braid" train "$config" "${common[@]}" --set train.resume=always --set train.max_steps=$((newest + 1)) \
    --set train.out_dir="$run" >"$out/log" 2>&1 || fail "round $round: the resumed run failed (newest complete: step $newest)"
  stem=$(printf '%s/ckpt-%08d' "$run" "$newest")
  grep -qF "resumed from $stem (step $newest," "$out/log" || fail "round $round: did not resume from $stem"
  if grep -q "skipping unusable" "$out/log"; then fail "round $round: a complete-looking checkpoint was unusable"; fi
  echo "round $round: killed after step $newest was complete ($partial step folders), resumed from it"
  rm -rf "$run"
done
echo "PASS: $rounds kills during asynchronous saves, every resume from the newest complete checkpoint"
