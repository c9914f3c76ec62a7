#!/usr/bin/env bash
# D-PSGD (parallel.strategy = gossip) and timeout-hybrid synchronisation
# (parallel.strategy = hybrid) through `braid launch` over tcp on loopback: a
# small Fashion-MNIST MLP, checking each run's plan, report line, final
# accuracy and --summary-json figures: gossip on a ring and an exponential
# graph of 4 (spectral gap, bytes, consensus distance), resumed from a
# checkpoint, on the data axis of a two-stage pipeline, and asynchronous with
# a straggler; hybrid without a deadline (every gradient in), and with a
# straggler past the deadline (late gradients dropped, or applied stale; the
# straggler skipping closed steps), and the same via all-reduce. Then a worker of each is killed with
# SIGKILL mid-run in a job of two launchers (two "nodes" on loopback): the
# survivors' own errors must name the dead rank, and both launchers must end
# within 2 x parallel.timeout_s.
# usage: gossip_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-gossip-launch.XXXXXX)
trap 'rm -rf "$out"' EXIT
small=(--set model.hidden=32 --set train.batch_size=32 --set train.log_every=10 --set train.threads=1
       --set train.progress=lines --set train.checkpoint_every=15 --set parallel.transport=tcp
       --set train.out_dir="$out/run")
fail() { cat "$out/$1.log" 2>/dev/null || true; echo "FAIL: $1: $2"; exit 1; }
run() {  # run NAME WORKERS REPORT_REGEX PYTHON_ASSERTS KEY=VALUE...
  local name=$1 n=$2 report=$3 asserts=$4; shift 4
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  timeout 300 "$braid" launch -n "$n" -- "$braid" train "$config" "${small[@]}" "${sets[@]}" \
    --summary-json "$out/$name.json" >"$out/$name.log" 2>&1 || fail "$name" "the run failed"
  local log="$out/$name.log" line
  grep -Eq "plan: .*aggregation (gossip|hybrid)" "$log" || fail "$name" "printed no gossip or hybrid plan"
  line=$(grep -E "$report" "$log") || fail "$name" "no report line matching: $report"
  grep -Eq "final test accuracy: top-1 0\.[4-9][0-9]*" "$log" || fail "$name" "no test accuracy above 0.4"
  /usr/bin/python3 -c "import json, sys; a = json.load(open(sys.argv[1]))['aggregation']; $asserts" \
    "$out/$name.json" || { cat "$out/$name.json"; fail "$name" "summary: $asserts"; }
  echo "ok: $name: ${line#*\] }; $(grep -o 'final test accuracy: top-1 [0-9.]*' "$log")"
}

g="gossip \(D-PSGD\): "
bytes="[0-9]+ bytes sent per rank per step \(all-reduce [0-9]+\)"
run ring 4 "${g}ring of 4 \(symmetric, weights 1/3, \|lambda_2\| 0\.3333, spectral gap 0\.6667\).* 30 steps, $bytes; consensus distance [0-9.e+-]+ at step 30, then averaged exactly" \
  "assert abs(a['spectral_gap'] - 2/3) < 1e-12 and a['consensus_distance'] > 0 and a['steps'] == 30, a; \
assert a['bytes_per_step'] == 2 * a['entries'] * 4, a" \
  parallel.strategy=gossip gossip.topology=ring train.max_steps=30
if grep -q "gossip: consensus distance .* after step" "$out/ring.log"; then  # by default: at the end only
  fail ring "measured the consensus distance during the run"
fi
run resumed 4 "${g}ring of 4 .* 10 steps" "assert a['steps'] == 10, a" \
  parallel.strategy=gossip gossip.topology=ring train.max_steps=40 train.resume=auto
grep -q "resumed from .*(step 30," "$out/resumed.log" || fail resumed "not resumed from step 30"
rm -rf "$out/run"
run exponential 4 "${g}exponential of 4 \(directed, circulant doubly stochastic, weights 1/3, \|lambda_2\| 0\.3333, spectral gap 0\.6667\); rank 0 receives from \[3, 2\]" \
  "assert a['receives_from'] == [3, 2] and a['sends_to'] == [1, 2], a" \
  parallel.strategy=gossip gossip.topology=exponential gossip.consensus_every=10 train.max_steps=30
grep -q "gossip: consensus distance .* after step 20" "$out/exponential.log" || fail exponential "no consensus log"
rm -rf "$out/run"
run pipeline 4 "${g}ring of 2 .*; rank 0 receives from \[1\]" "assert a['replicas'] == 2, a" \
  parallel.strategy=gossip parallel.pipeline=2 parallel.microbatches=2 train.max_steps=20
rm -rf "$out/run"
# Asynchronous, with rank 1 20 ms slower a step: no one waits for it.
run gossip_async 4 "${g}ring of 4 .* 30 steps, $bytes; asynchronous: [0-9.]+ neighbour weights mixed per step .*then averaged exactly" \
  "assert a['mode'] == 'async' and a['steps'] == 30 and a['consensus_distance'] >= 0, a" \
  parallel.strategy=gossip gossip.mode=async train.max_steps=30 train.straggler_rank=1 train.straggler_ms=20
rm -rf "$out/run"

h="timeout-hybrid: 30 steps of 3 replicas, "
run hybrid_sync 3 "${h}no deadline; 3\.00 gradients arrived per step, 0 late" \
  "assert a['arrived'] == 90 and a['late'] == 0 and a['dropped'] == 0, a" \
  parallel.strategy=hybrid hybrid.timeout_ms=0 train.max_steps=30
run hybrid_resumed 3 "timeout-hybrid: 10 steps of 3 replicas, no deadline; 3\.00 gradients arrived per step" \
  "assert a['arrived'] == 30, a" parallel.strategy=hybrid hybrid.timeout_ms=0 train.max_steps=40 train.resume=auto
grep -q "resumed from .*(step 30," "$out/hybrid_resumed.log" || fail hybrid_resumed "not resumed from step 30"
rm -rf "$out/run"
# Rank 1 sleeps 30 ms a step, the coordinator waits 5 ms: its gradients are late.
run hybrid_drop 3 "${h}deadline 5 ms; [12]\.[0-9]+ gradients arrived per step, [0-9]+ late, 0 applied stale" \
  "assert a['late'] >= 25 and a['dropped'] == a['late'] and a['arrived'] + a['late'] == 90, a" \
  parallel.strategy=hybrid hybrid.timeout_ms=5 train.straggler_rank=1 train.straggler_ms=30 train.max_steps=30
rm -rf "$out/run"
# Computing every step (catch_up = compute), max_lag 2 keeps the late
# gradients within hybrid.max_staleness (4): applied stale.
run hybrid_stale 3 "${h}deadline 5 ms; .* late, [1-9][0-9]* applied stale \(max staleness [1-4]\)" \
  "assert a['stale_applied'] >= 20 and a['max_lag'] <= 2 and a['late'] == a['stale_applied'] + a['dropped'], a" \
  parallel.strategy=hybrid hybrid.timeout_ms=5 hybrid.late=stale hybrid.max_lag=2 hybrid.catch_up=compute \
  train.straggler_rank=1 train.straggler_ms=30 train.max_steps=30
rm -rf "$out/run"
# Skipping (the default): the straggler computes only the steps still open.
run hybrid_skip 3 "${h}deadline 5 ms; .* dropped \([1-9][0-9]* never computed: skipped to catch up\)" \
  "assert a['skipped'] >= 10 and a['catch_up'] == 'skip' and a['late'] == a['stale_applied'] + a['dropped'], a" \
  parallel.strategy=hybrid hybrid.timeout_ms=5 train.straggler_rank=1 train.straggler_ms=30 train.max_steps=30
rm -rf "$out/run"
# The same rules without a coordinator (hybrid.via = allreduce): every rank's
# step closer joins each step's all-reduce, its deadline 20 ms after the
# previous aggregate; rank 1 sleeps 60 ms a step.
ha="timeout-hybrid via all-reduce: 30 steps of 3 replicas, "
run hybrid_ar_sync 3 "${ha}no deadline; 3\.00 gradients arrived per step, 0 late" \
  "assert a['via'] == 'allreduce' and a['arrived'] == 90 and a['late'] == 0 and a['dropped'] == 0, a" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=0 train.max_steps=30
run hybrid_ar_resumed 3 "timeout-hybrid via all-reduce: 10 steps of 3 replicas, no deadline; 3\.00 gradients" \
  "assert a['arrived'] == 30, a" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=0 train.max_steps=40 train.resume=auto
grep -q "resumed from .*(step 30," "$out/hybrid_ar_resumed.log" || fail hybrid_ar_resumed "not resumed from step 30"
rm -rf "$out/run"
run hybrid_ar_pipeline 4 "timeout-hybrid via all-reduce: 20 steps of 2 replicas, deadline 50 ms" \
  "assert a['via'] == 'allreduce' and a['replicas'] == 2 and a['arrived'] + a['late'] == 40, a" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=50 parallel.pipeline=2 parallel.microbatches=2 \
  train.max_steps=20
rm -rf "$out/run"
run hybrid_ar_skip 3 "${ha}deadline 20 ms; .* dropped \([1-9][0-9]* never computed: skipped to catch up\)" \
  "assert a['skipped'] >= 10 and a['late'] == a['stale_applied'] + a['dropped'] and a['arrived'] + a['late'] == 90, a" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=20 train.straggler_rank=1 train.straggler_ms=60 \
  train.max_steps=30
rm -rf "$out/run"
run hybrid_ar_stale 3 "${ha}deadline 20 ms; .* late, [1-9][0-9]* applied stale \(max staleness [1-4]\)" \
  "assert a['stale_applied'] >= 10 and a['max_lag'] <= 2 and a['late'] == a['stale_applied'] + a['dropped'], a" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=20 hybrid.late=stale hybrid.max_lag=2 \
  hybrid.catch_up=compute train.straggler_rank=1 train.straggler_ms=60 train.max_steps=30
rm -rf "$out/run"

# kill_one NAME DEAD_RANK MESSAGE_REGEX KEY=VALUE...: 4 ranks, each under its own
# launcher (four "nodes" on loopback, so no launcher stops a survivor before
# it has spoken); SIGKILL rank DEAD_RANK after the checkpoint of step 50.
timeout_s=10
kill_one() {
  local name=$1 dead=$2 message=$3; shift 3
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  local port
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local job=(--nnodes 4 --master-addr 127.0.0.1 --master-port "$port" -n 1 -- "$braid" train "$config"
             --set model.hidden=256 --set train.batch_size=32 --set train.epochs=1 --set train.threads=1
             --set train.log_every=50 --set train.progress=lines --set train.checkpoint_every=50
             --set parallel.transport=tcp --set parallel.timeout_s=$timeout_s --set train.straggler_rank=1
             --set train.straggler_ms=10 --set train.out_dir="$out/$name" "${sets[@]}")
  local nodes=()
  for node in 0 1 2 3; do
    BRAID_TOKEN=gossip-launch-test "$braid" launch --node-rank $node "${job[@]}" >"$out/$name.node$node.log" 2>&1 &
    nodes+=($!)
  done
  for _ in $(seq 1 600); do
    ls "$out/$name/ckpt-00000050.json" >/dev/null 2>&1 && break
    sleep 0.1
  done
  ls "$out/$name/ckpt-00000050.json" >/dev/null 2>&1 ||
    { kill "${nodes[@]}"; cat "$out/$name".node*.log; fail "$name" "no checkpoint appeared"; }
  local killed=0
  for pid in $(pgrep -f -- "train.out_dir=$out/$name" || true); do
    if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx "RANK=$dead"; then
      kill -9 "$pid" && killed=1
    fi
  done
  [[ $killed == 1 ]] || { kill "${nodes[@]}"; fail "$name" "rank $dead not found"; }
  local start status=() elapsed
  start=$(date +%s.%N)
  for pid in "${nodes[@]}"; do timeout $((3 * timeout_s)) tail --pid="$pid" -f /dev/null || true; done
  elapsed=$(/usr/bin/python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  for pid in "${nodes[@]}"; do
    local s=0
    wait "$pid" || s=$?
    status+=("$s")
  done
  /usr/bin/python3 -c "import sys; sys.exit(0 if $elapsed < 2 * $timeout_s else 1)" ||
    { cat "$out/$name".node*.log; fail "$name" "the job took ${elapsed}s after the kill (limit $((2 * timeout_s))s)"; }
  [[ " ${status[*]} " != *" 0 "* ]] ||
    { cat "$out/$name".node*.log; fail "$name" "launchers exited with ${status[*]} after a rank was killed"; }
  grep -q "rank $dead failed first: killed by signal 9" "$out/$name.node$dead.log" ||
    { cat "$out/$name.node$dead.log"; fail "$name" "the dead rank's launcher does not say it was killed"; }
  local line
  line=$(grep -E "$message" "$out/$name.node0.log") ||
    { cat "$out/$name".node*.log; fail "$name" "rank 0 did not name rank $dead: $message"; }
  echo "ok: $name: rank $dead killed, every launcher over ${elapsed}s later (exit ${status[*]}); ${line#*\] }"
}
kill_one gossip_kill 3 "rank 0 of 4 on the data axis: gossip's (receive of rank 3's weights|send of its weights to rank 3) in step [0-9]+ failed" \
  parallel.strategy=gossip
# Asynchronous ranks run ahead of the straggler: rank 0 may be waiting in a
# checkpoint's all-reduce (collective by step) when rank 3 dies; that error
# lists the ranks that did not answer, rank 3 alone or among the others that
# its death brought down ("ranks 1, 2, 3 did not answer").
kill_one gossip_async_kill 3 "rank 0 of 4 on the data axis: (asynchronous gossip's (receive of rank 3's weights|send of its weights to rank 3) in step [0-9]+ failed|gossip's all-reduce .*ranks? ([0-9]+, )*3 did not answer)" \
  parallel.strategy=gossip gossip.mode=async
kill_one hybrid_kill 2 "rank 0 of 4 on the data axis: timeout-hybrid's coordinator .*rank 2's gradient of step [0-9]+" \
  parallel.strategy=hybrid hybrid.timeout_ms=50
kill_one hybrid_ar_kill 2 "rank 0 of 4 on the data axis: timeout-hybrid \(via all-reduce\) all-reduce of the (record|gradients) of step [0-9]+" \
  parallel.strategy=hybrid hybrid.via=allreduce hybrid.timeout_ms=50
