#!/usr/bin/env bash
# The model-averaging family through `braid launch` over tcp on loopback:
# local_sgd (warm-up), bmuf, easgd and admm with 3 workers, each printing its
# plan, its bytes against all-reduce (fewer) and the final accuracy, with the
# same figures in --summary-json; a resumed run; local SGD on the data axis of
# a two-stage pipeline; asynchronous EASGD and ADMM through a parameter
# server, on one node and over two launchers (node 0 the server and worker 0,
# node 1 worker 1 only). Faults: kill -9 of a worker of a local SGD job (the launcher stops
# the group within 2x parallel.timeout_s naming the rank; with --max-restarts 1
# the group resumes from its checkpoint and finishes) and of a worker of an
# asynchronous EASGD job (the others finish without it).
# usage: averaging_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-averaging-launch.XXXXXX)
trap "rm -rf $out" EXIT
export BRAID_TRANSPORT=tcp  # workers and parameter servers alike
small=(--set model.hidden=32 --set train.batch_size=32 --set train.log_every=10 --set train.threads=1
       --set train.progress=lines --set train.checkpoint_every=15)
fail() { cat "$2"; echo "FAIL: $1"; exit 1; }

run() {  # run NAME STRATEGY REPORT_REGEX LAUNCH_ARGS -- KEY=VALUE...
  local name=$1 strategy=$2 report=$3; shift 3
  local launch=()
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done
  shift
  local sets=()
  # Every strategy's own period of 4 steps (a key another strategy does not read is refused).
  case $strategy in
    local_sgd|bmuf) sets+=(--set local_sgd.period=4) ;;
    easgd) sets+=(--set easgd.tau=4) ;;
    admm) sets+=(--set admm.tau=4) ;;
  esac
  for kv in "$@"; do sets+=(--set "$kv"); done
  local log="$out/$name.log"
  timeout 300 "$braid" launch "${launch[@]}" -- "$braid" train "$config" "${small[@]}" \
    --set parallel.strategy="$strategy" --set train.out_dir="$out/$name-run" "${sets[@]}" \
    --summary-json "$out/$name.json" >"$log" 2>&1 || fail "$name exited with $?" "$log"
  grep -q "plan: .*aggregation $strategy" "$log" || fail "$name printed no $strategy plan" "$log"
  local line
  line=$(grep -E "$report" "$log") || fail "$name: no report line matching '$report'" "$log"
  grep -Eq "final test accuracy: top-1 0\.[0-9]+" "$log" || fail "$name has no test accuracy" "$log"
  echo "ok: $name: $line; $(grep -o 'final test accuracy: top-1 [0-9.]*' "$log")"
}

# Fewer bytes than all-reduce per step, from the summary.
fewer_bytes() {
  /usr/bin/python3 - "$out/$1.json" <<'PY' || { cat "$out/$1.json"; echo "FAIL: $1 summary"; exit 1; }
import json, sys
a = json.load(open(sys.argv[1]))["aggregation"]
assert 0 < a["bytes_per_step"] < a["allreduce_bytes_per_step"], a
PY
}

bytes='[0-9]+ bytes sent per (rank|worker) per step'
run local_sgd local_sgd "local SGD: [0-9]+ averagings every 4 steps after 5 synchronous steps in 30 steps; $bytes" \
  -n 3 -- train.max_steps=30 local_sgd.warmup=5
fewer_bytes local_sgd
run local_sgd_resumed local_sgd "local SGD: .* in 10 steps" -n 3 -- train.max_steps=40 train.resume=auto \
  train.out_dir="$out/local_sgd-run"
grep -q "resumed from .*(step 30," "$out/local_sgd_resumed.log" || fail "not resumed from step 30" "$out/local_sgd_resumed.log"
run bmuf bmuf "BMUF \(block momentum 0.5, block lr 1, Nesterov\): [0-9]+ averagings every 4 steps in 30 steps; $bytes" \
  -n 3 -- train.max_steps=30 bmuf.momentum=0.5
fewer_bytes bmuf
run easgd easgd "EASGD \(synchronous, alpha 0.3, beta 0.9\): 7 exchanges every 4 steps in 30 steps; $bytes" \
  -n 3 -- train.max_steps=30
fewer_bytes easgd
run admm admm "ADMM \(synchronous, rho 0.01\): 7 rounds of 4 local steps" -n 3 -- train.max_steps=30
run pipeline local_sgd "local SGD: .* in 20 steps" -n 4 -- train.max_steps=20 parallel.pipeline=2 parallel.microbatches=2
run easgd_async easgd "EASGD \(asynchronous, center on parameter servers, alpha 0.45, beta 0.9\): 7 exchanges" \
  --servers 1 --workers 2 -- train.max_steps=30 easgd.mode=async
run admm_async admm "ADMM \(asynchronous, z on parameter servers, barrier 1, max delay 1" \
  --servers 1 --workers 2 -- train.max_steps=30 admm.mode=async admm.barrier=1 admm.max_delay=1

# Asynchronous EASGD over two launchers on loopback, as on two hosts: node 0
# runs the server and worker 0 (rank 1), node 1 worker 1 (rank 2) only.
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
two=(--nnodes 2 --master-addr 127.0.0.1 --master-port "$port")
job=("$braid" train "$config" "${small[@]}" --set parallel.strategy=easgd --set easgd.mode=async
     --set train.max_steps=30 --set train.out_dir="$out/two-nodes-run")
BRAID_TOKEN=averaging-two-nodes timeout 300 "$braid" launch "${two[@]}" --node-rank 1 --servers 0 --workers 1 \
  -- "${job[@]}" >"$out/two-nodes-1.log" 2>&1 &
node1=$!
BRAID_TOKEN=averaging-two-nodes timeout 300 "$braid" launch "${two[@]}" --node-rank 0 --servers 1 --workers 1 \
  -- "${job[@]}" >"$out/two-nodes-0.log" 2>&1 || fail "node 0 of the two-node EASGD job exited with $?" "$out/two-nodes-0.log"
wait "$node1" || fail "node 1 of the two-node EASGD job exited with $?" "$out/two-nodes-1.log"
grep -q "\[rank 1\] EASGD (asynchronous, center on parameter servers, alpha 0.45, beta 0.9): 7 exchanges" \
  "$out/two-nodes-0.log" || fail "worker 0 of the two-node job printed no EASGD report" "$out/two-nodes-0.log"
grep -q "\[rank 2\] .*joined a group of 3 ranks over tcp" "$out/two-nodes-1.log" ||
  fail "worker 1 of the two-node job did not join" "$out/two-nodes-1.log"
grep -q "group of 2 workers and 1 parameter server over tcp" "$out/two-nodes-0.log" ||
  fail "the two-node job is not one group of 2 workers and a server" "$out/two-nodes-0.log"
echo "ok: easgd_async over two launchers: $(grep -o 'final test accuracy: top-1 [0-9.]*' "$out/two-nodes-0.log")"

# Waits (bounded) for a first checkpoint in OUTDIR (older ones are pruned, so
# any will do), then kill -9s the process of that job with RANK.
kill_rank() {  # kill_rank OUTDIR RANK LAUNCHER LOG
  local dir=$1 rank=$2 launcher=$3 log=$4 seen=
  for _ in $(seq 1 600); do
    compgen -G "$dir/ckpt-*.json" >/dev/null && { seen=1; break; }
    sleep 0.1
  done
  [[ -n $seen ]] || { kill "$launcher" 2>/dev/null; fail "no checkpoint appeared in $dir" "$log"; }
  for pid in $(pgrep -f -- "train.out_dir=$dir" || true); do
    if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx "RANK=$rank"; then
      kill -9 "$pid" && return 0
    fi
  done
  kill "$launcher" 2>/dev/null
  fail "rank $rank of $dir not found" "$log"
}

# Waits at most SECONDS for the launcher, then sets `status` to its exit code.
wait_launcher() {  # wait_launcher LAUNCHER SECONDS
  timeout "$2" tail --pid="$1" -f /dev/null || true
  status=0
  wait "$1" || status=$?
}

# kill -9 of worker 1 of a local SGD job: the job ends naming it.
# Rank 0 sleeps 20 ms a step so the job is still running when the kill comes.
killed=(--set train.max_steps=100000 --set train.checkpoint_every=20 --set parallel.timeout_s=5
        --set train.straggler_rank=0 --set train.straggler_ms=20)
log="$out/killed.log"
"$braid" launch -n 3 -- "$braid" train "$config" "${small[@]}" "${killed[@]}" --set parallel.strategy=local_sgd --set local_sgd.period=4 \
  --set train.out_dir="$out/killed-run" >"$log" 2>&1 &
launcher=$!
kill_rank "$out/killed-run" 1 "$launcher" "$log"
start=$(date +%s.%N)
wait_launcher "$launcher" 60
took=$(python3 -c "import time; print(round(time.time() - $start, 1))")
[[ $status != 0 ]] || fail "the launcher succeeded after a worker was killed" "$log"
# The launcher may see rank 1's death first, or a survivor's error naming it.
grep -Eq "rank 1 failed first|connection to rank 1 lost" "$log" || fail "nothing names rank 1" "$log"
python3 -c "import sys; sys.exit(0 if $took <= 10 else 1)" || fail "took ${took}s to end, more than 2 x 5 s" "$log"
echo "ok: kill -9 of rank 1 (local SGD): the job ended after ${took}s; $(grep -Eo "rank 1 failed first|connection to rank 1 lost" "$log" | head -1)"

# The same with --max-restarts 1: the group resumes from its checkpoint and finishes.
log="$out/restarted.log"
"$braid" launch -n 3 --max-restarts 1 -- "$braid" train "$config" "${small[@]}" --set train.max_steps=60 \
  --set train.checkpoint_every=20 --set parallel.strategy=local_sgd --set local_sgd.period=4 --set train.resume=auto \
  --set train.straggler_rank=0 --set train.straggler_ms=20 \
  --set train.out_dir="$out/restarted-run" >"$log" 2>&1 &
launcher=$!
kill_rank "$out/restarted-run" 2 "$launcher" "$log"
wait_launcher "$launcher" 200
[[ $status == 0 ]] || fail "the restarted group exited with $status" "$log"
grep -q "resumed from" "$log" || fail "the restarted group did not resume" "$log"
grep -Eq "final test accuracy: top-1 0\.[0-9]+" "$log" || fail "the restarted group has no accuracy" "$log"
echo "ok: kill -9 of rank 2 (local SGD, --max-restarts 1): resumed and finished"

# kill -9 of worker 1 of an asynchronous EASGD job (slowed, so it is still
# training when worker 0 checkpoints): the server goes on without it.
log="$out/async_killed.log"
"$braid" launch --servers 1 --workers 3 -- "$braid" train "$config" "${small[@]}" --set train.max_steps=300 \
  --set parallel.strategy=easgd --set easgd.mode=async --set train.straggler_rank=1 --set train.straggler_ms=20 \
  --set parallel.timeout_s=5 --set train.out_dir="$out/async-run" >"$log" 2>&1 &
launcher=$!
kill_rank "$out/async-run" 2 "$launcher" "$log"
wait_launcher "$launcher" 120
[[ $status == 0 ]] || fail "asynchronous EASGD did not finish without the killed worker (exit $status)" "$log"
grep -Eq "worker 1 \(rank 2\) is gone" "$log" || fail "the server did not name the killed worker" "$log"
grep -Eq "final test accuracy: top-1 0\.[0-9]+" "$log" || fail "no accuracy after the kill" "$log"
echo "ok: kill -9 of worker 1 (asynchronous EASGD): the server named it, the others finished"
