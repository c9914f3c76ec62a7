#!/usr/bin/env bash
# A group restarted by `braid launch --max-restarts` resumes by default
# (train.resume = auto): kill -9 rank 1 of a 2-rank data-parallel run after
# step 250 of 500 (checkpoints every 100), and the restarted group must log
# that it resumed from the newest checkpoint written before the kill (200 or
# later), take no step at or below it again (so it cannot have written
# ckpt-100 or ckpt-200 over the first attempt's), and finish at step 500.
# usage: restart_resume.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-restart-resume.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/log" 2>/dev/null | tail -40; exit 1; }

# Rank 0 sleeps 10 ms a step, so steps 250..299 last about half a second:
# time enough to kill rank 1 between them on a loaded machine.
"$braid" launch -n 2 --max-restarts 1 -- "$braid" train "$config" \
  --set parallel.strategy=allreduce --set train.max_steps=500 --set train.checkpoint_every=100 \
  --set train.threads=1 --set train.eval_every=0 --set parallel.timeout_s=10 --set train.progress=lines \
  --set train.log_every=10 --set train.straggler_rank=0 --set train.straggler_ms=10 \
  --set train.out_dir="$out/run" >"$out/log" 2>&1 &
launcher=$!
for _ in $(seq 1 1200); do
  grep -qE "step 2[5-9][0-9]/500" "$out/log" && break
  kill -0 "$launcher" 2>/dev/null || fail "the job ended before step 250"
  sleep 0.05
done
grep -qE "step 2[5-9][0-9]/500" "$out/log" || { kill "$launcher"; fail "no step 250 within 60 s"; }
killed=0
for pid in $(pgrep -f -- "train.out_dir=$out/run" || true); do
  if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx 'RANK=1'; then
    kill -9 "$pid" && killed=1
  fi
done
# The checkpoints complete when rank 1 died (a sidecar is the commit record).
newest=$(ls "$out/run" | sed -n 's/^ckpt-0*\([0-9][0-9]*\)\.json$/\1/p' | sort -n | tail -1)
[[ $killed == 1 ]] || { kill "$launcher"; fail "rank 1 not found"; }
status=0
timeout 120 tail --pid="$launcher" -f /dev/null || true
wait "$launcher" || status=$?
[[ $status == 0 ]] || fail "the launcher exited with $status"
grep -q "restarting the group" "$out/log" || fail "the group was not restarted"
after=$(sed -n '/restarting the group/,$p' "$out/log")
resumed=$(grep -oE "resumed from [^ ]*ckpt-0*[0-9]+ \(step [0-9]+" <<<"$after" | grep -oE "[0-9]+$" | head -1 || true)
[[ -n $resumed ]] || fail "the restarted group did not log 'resumed from': it started over"
((resumed >= 200)) || fail "resumed from step $resumed, before the kill after step 250"
[[ $resumed == "$newest" ]] || fail "resumed from step $resumed, but step $newest was the newest checkpoint at the kill"
first=$(grep -oE "step [0-9]+/500" <<<"$after" | head -1 | grep -oE "[0-9]+" | head -1)
((first > resumed)) || fail "the restarted group logged step $first/500, at or before step $resumed it resumed from"
grep -qE "step 500/500" <<<"$after" || fail "the restarted group did not reach step 500"
echo "PASS: rank 1 killed after step 250; the restarted group resumed from step $resumed and went on at step $first"
