#!/usr/bin/env bash
# Parameter-server jobs end to end, through `braid launch --servers --workers`
# on Fashion-MNIST (or generated sparse data), one scenario per call:
#   asp_accuracy         2 workers, asp: test accuracy >= 0.85
#   worker_kill_asp      kill -9 one of 3 asp workers: the others finish
#   bsp_worker_death     kill -9 a bsp worker: an error naming it, quickly
#   server_kill_restart  kill -9 a server: the group restarts, the server
#                        recovers its shard losing at most one checkpoint interval
#   sparse_linear        embedding-bag model on hashed sparse features
# usage: ps_jobs.sh SCENARIO BRAID_BINARY REPO_ROOT
set -uo pipefail
scenario=$1
braid=$2
root=$3
config=$root/examples/configs/fashion_mlp.toml
out=$(mktemp -d /tmp/braid-ps-jobs.XXXXXX)
trap 'kill "${launcher:-}" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL ($scenario): $*"; echo "--- log ---"; cat "$out/log" 2>/dev/null | tail -60; exit 1; }

# pid of the process with RANK=$1 whose command line mentions $2
pid_of_rank() {
  for pid in $(pgrep -f -- "$2" || true); do
    if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx "RANK=$1"; then echo "$pid"; return; fi
  done
}

# kill_then_wait RANK PATTERN WHAT SECONDS: kill -9 that rank of the running job, then wait
# (bounded) for the launcher; sets $status to its exit code.
kill_then_wait() {
  local victim
  victim=$(pid_of_rank "$1" "$2")
  [[ -n $victim ]] || fail "$3 rank $1 not found"
  kill -9 "$victim"
  timeout "$4" tail --pid="$launcher" -f /dev/null
  wait "$launcher"; status=$?
}

wait_for() {  # wait_for PATTERN SECONDS: until the log has the pattern
  for _ in $(seq 1 $(( $2 * 10 ))); do
    grep -qE -- "$1" "$out/log" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

train=("$braid" train "$config" --set parallel.strategy=ps --set train.out_dir="$out/run" --set train.threads=1
       --set train.progress=lines)

case $scenario in
asp_accuracy)
  "$braid" launch --servers 1 --workers 2 -- "${train[@]}" --set ps.consistency=asp --set train.epochs=4 \
    >"$out/log" 2>&1 || fail "launch exited with $?"
  acc=$(grep -oE "final test accuracy: top-1 [0-9.]+" "$out/log" | grep -oE "[0-9.]+$")
  [[ -n $acc ]] || fail "no final accuracy"
  python3 -c "import sys; sys.exit(0 if $acc >= 0.85 else 1)" || fail "asp reached top-1 $acc < 0.85"
  echo "PASS: asp top-1 $acc"
  ;;
worker_kill_asp)
  "$braid" launch --servers 1 --workers 3 -- "${train[@]}" --set ps.consistency=asp --set train.max_steps=400 \
    --set train.log_every=20 --set parallel.timeout_s=20 >"$out/log" 2>&1 &
  launcher=$!
  wait_for "step 40/" 60 || fail "training did not start"
  kill_then_wait 3 "train.out_dir=$out/run" worker 120
  [[ $status == 0 ]] || fail "launch exited with $status"
  grep -q "worker 2 (rank 3) is gone" "$out/log" || fail "the server did not notice the dead worker"
  grep -q "training finished without workers \[3\]" "$out/log" || fail "no summary of the lost worker"
  grep -q "final test accuracy" "$out/log" || fail "worker 0 did not finish"
  echo "PASS: asp went on without the killed worker"
  ;;
bsp_worker_death)
  start=$(date +%s)
  "$braid" launch --servers 1 --workers 2 -- "${train[@]}" --set ps.consistency=bsp --set train.max_steps=2000 \
    --set train.log_every=20 --set parallel.timeout_s=20 >"$out/log" 2>&1 &
  launcher=$!
  wait_for "step 40/" 60 || fail "training did not start"
  kill_then_wait 2 "train.out_dir=$out/run" worker 60
  elapsed=$(( $(date +%s) - start ))
  [[ $status != 0 ]] || fail "launch succeeded although a bsp worker died"
  grep -q "worker 1 (rank 2) is gone" "$out/log" || fail "the error does not name the dead worker"
  grep -q "server rank 0 failed first" "$out/log" || fail "the launcher did not report the server's failure"
  echo "PASS: bsp stopped with an error naming worker 1 (rank 2) after ${elapsed}s"
  ;;
server_kill_restart)
  every=20
  "$braid" launch --servers 2 --workers 2 --max-restarts 1 -- "${train[@]}" --set ps.consistency=bsp \
    --set ps.checkpoint_every=$every --set train.max_steps=400 --set train.log_every=10 --set train.resume=auto \
    --set train.checkpoint_every=100 --set parallel.timeout_s=30 --set train.eval_every=0 >"$out/log" 2>&1 &
  launcher=$!
  wait_for "ps server 1: checkpoint at update (6|7|8|9)[0-9]" 90 || fail "server 1 wrote no checkpoint"
  step=$(grep -oE "step [0-9]+/" "$out/log" | tail -1 | grep -oE "[0-9]+")
  kill_then_wait 1 "ps server" server 180
  [[ $status == 0 ]] || fail "launch exited with $status"
  grep -q "restarting the group" "$out/log" || fail "the group was not restarted"
  recovered=$(grep -oE "ps server 1: recovered its shard from .* \(update [0-9]+" "$out/log" | grep -oE "[0-9]+$")
  [[ -n $recovered ]] || fail "server 1 did not recover its shard"
  # In bsp one step is one update; the log lags the kill by at most log_every steps.
  (( recovered >= step - every )) || fail "recovered update $recovered, but the run was at step $step (interval $every)"
  echo "PASS: server 1 killed near update $step, recovered update $recovered (interval $every)"
  ;;
sparse_linear)
  python3 "$root/scripts/make_sparse_data.py" --out "$out/sparse.libsvm" --examples 12000 --features 50000 >/dev/null \
    || fail "could not generate data"
  "$braid" launch --servers 2 --workers 2 -- "$braid" train "$root/examples/configs/sparse_ps.toml" \
    --set data.path="$out/sparse.libsvm" --set train.out_dir="$out/run" >"$out/log" 2>&1 || fail "launch exited with $?"
  acc=$(grep -oE "test: loss [0-9.]+, top-1 [0-9.]+" "$out/log" | grep -oE "[0-9.]+$")
  [[ -n $acc ]] || fail "no test accuracy"
  python3 -c "import sys; sys.exit(0 if $acc >= 0.72 else 1)" || fail "sparse_linear reached top-1 $acc < 0.72"
  grep -q "table rows pulled" "$out/log" || fail "no pull count"
  echo "PASS: sparse_linear top-1 $acc"
  ;;
*) echo "unknown scenario $scenario"; exit 2 ;;
esac
