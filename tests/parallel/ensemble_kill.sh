#!/usr/bin/env bash
# Fault test: kill -9 one ensemble member mid-run. The job must end within
# 2 x parallel.timeout_s of the kill with a message naming the dead rank.
#  1. One `braid launch -n 3`: the launcher sees rank 1 die and stops the
#     others at once ("rank 1 failed first: killed by signal 9").
#  2. Two launchers (--nnodes 2, one member each), as on two hosts: killing
#     rank 1 stops only its own node, so member 0, which exchanges nothing
#     with member 1 while it trains, must notice through the members'
#     heartbeats in the job's store and stop mid-training, naming member 1.
# usage: ensemble_kill.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
timeout_s=3
out=$(mktemp -d /tmp/braid-ensemble-kill.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; for f in "${@:2}"; do echo "--- $f"; cat "$f"; done; exit 1; }
args=(train "$config" --set parallel.strategy=ensemble --set train.epochs=5 --set train.threads=1
      --set train.progress=lines --set train.log_every=500 --set train.checkpoint_every=100
      --set parallel.timeout_s=$timeout_s --set parallel.transport=tcp)

# Waits (bounded) for member 1's first checkpoint under $1, then kill -9s
# rank 1; prints the time of the kill (seconds since the epoch).
kill_rank1() {
  local dir=$1
  for _ in $(seq 1 300); do
    ls "$dir/member-1/ckpt-00000100.json" >/dev/null 2>&1 && break
    sleep 0.1
  done
  ls "$dir/member-1/ckpt-00000100.json" >/dev/null 2>&1 || return 1
  for pid in $(pgrep -f -- "train.out_dir=$dir" || true); do
    if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx 'RANK=1'; then
      kill -9 "$pid" && date +%s.%N && return 0
    fi
  done
  return 1
}
within() {  # within START END: END - START < 2 x timeout_s
  python3 -c "import sys; sys.exit(0 if $2 - $1 < 2 * $timeout_s else 1)"
}

# 1. One launcher.
"$braid" launch -n 3 -- "$braid" "${args[@]}" --set train.out_dir="$out/one" >"$out/one.log" 2>&1 &
launcher=$!
pids+=("$launcher")
killed_at=$(kill_rank1 "$out/one") || fail "rank 1 never checkpointed or was not found" "$out/one.log"
status=0
wait "$launcher" || status=$?
ended=$(date +%s.%N)
[[ $status != 0 ]] || fail "the launcher succeeded although rank 1 was killed" "$out/one.log"
within "$killed_at" "$ended" || fail "ended $(python3 -c "print(round($ended - $killed_at, 1))") s after the kill" "$out/one.log"
grep -q "rank 1 failed first: killed by signal 9" "$out/one.log" || fail "the dead rank is not named" "$out/one.log"
echo "ok: one launcher: ended $(python3 -c "print(round($ended - $killed_at, 1))") s after the kill, naming rank 1"

# 2. Two launchers, one member each.
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
export BRAID_TOKEN=ensemble-kill-test
two=(--nnodes 2 --master-addr 127.0.0.1 --master-port "$port" -n 1)
"$braid" launch "${two[@]}" --node-rank 0 -- "$braid" "${args[@]}" --set train.out_dir="$out/two" >"$out/node0.log" 2>&1 &
node0=$!
"$braid" launch "${two[@]}" --node-rank 1 -- "$braid" "${args[@]}" --set train.out_dir="$out/two" >"$out/node1.log" 2>&1 &
node1=$!
pids+=("$node0" "$node1")
killed_at=$(kill_rank1 "$out/two") || fail "rank 1 never checkpointed or was not found" "$out/node0.log" "$out/node1.log"
status=0
wait "$node0" || status=$?
ended=$(date +%s.%N)
wait "$node1" || true
[[ $status != 0 ]] || fail "member 0 finished although member 1 was killed" "$out/node0.log"
within "$killed_at" "$ended" ||
  fail "member 0 ended $(python3 -c "print(round($ended - $killed_at, 1))") s after the kill" "$out/node0.log"
grep -q "member \[1\] silent" "$out/node0.log" || fail "member 0 does not name member 1" "$out/node0.log"
if grep -q "ensemble of 2 members" "$out/node0.log"; then fail "member 0 finished training first" "$out/node0.log"; fi
echo "ok: two launchers: member 0 stopped $(python3 -c "print(round($ended - $killed_at, 1))") s after the kill:"
grep -o "error: .*" "$out/node0.log" | head -1
