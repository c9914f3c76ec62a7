#!/usr/bin/env bash
# In-job recovery of data-parallel replicas (parallel.fault_tolerance =
# replica, docs/fault_tolerance.md): 4 replicas of the Fashion-MNIST MLP under
# `braid launch --replace 1` over loopback tcp, kill -9 of replica SLOT (1-3,
# random unless given) once replica 0 has logged step KILL_AT (random in
# 40..239 of 470 unless given). The job must go on without restarting: the
# survivors agree on [0..3] minus SLOT, the launcher's replacement joins with
# replica 0's state, replica 0's metrics.jsonl holds every step 1..470 exactly
# once, and the final test accuracy is within a point of an undisturbed run.
# Prints the time from the kill to the survivors' next completed step and the
# join's cost in step times. FAULT=stop sends SIGSTOP instead: the survivors
# time out and go on without it; once they have, SIGCONT lets it find that it
# was left out, fail, and be replaced by the launcher like a killed one.
# usage: [FAULT=kill|stop] replica_recovery.sh BRAID_BINARY CONFIG [SLOT [KILL_AT]]
set -euo pipefail
braid=$1
config=$2
slot=${3:-$(( RANDOM % 3 + 1 ))}
kill_at=${4:-$(( RANDOM % 200 + 40 ))}
fault=${FAULT:-kill}
timeout_s=3
out=$(mktemp -d /tmp/braid-replica.XXXXXX)
trap 'rm -rf "$out"' EXIT

run() {  # run NAME [launch options]: two epochs of 4 replicas (470 steps)
  local name=$1; shift
  "$braid" launch -n 4 "$@" -- "$braid" train "$config" \
    --set parallel.strategy=allreduce --set parallel.fault_tolerance=replica --set parallel.timeout_s=$timeout_s \
    --set train.epochs=2 --set train.out_dir="$out/$name" --set train.log_every=1 --set train.progress=lines \
    --set train.threads=1 --set train.checkpoint_every=0 --summary-json "$out/$name.json" >"$out/$name.log" 2>&1
}

run alone || { cat "$out/alone.log"; echo "FAIL: the undisturbed run failed"; exit 1; }

run killed --replace 1 &
launcher=$!
metrics="$out/killed/metrics.jsonl"
for _ in $(seq 1 1200); do
  n=$(grep -c '"event":"train"' "$metrics" 2>/dev/null || true)
  [[ ${n:-0} -ge $kill_at ]] && break
  sleep 0.02
done
killed_at=""
for pid in $(pgrep -f -- "train.out_dir=$out/killed" || true); do
  env_of=$(tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null || true)
  if grep -qx "RANK=$slot" <<<"$env_of" && ! grep -q BRAID_REPLICA_JOIN <<<"$env_of"; then
    if [[ $fault == stop ]]; then
      kill -STOP "$pid" && killed_at=$(date +%s.%N) && stopped=$pid
    else
      kill -9 "$pid" && killed_at=$(date +%s.%N)
    fi
  fi
done
[[ -n $killed_at ]] || { echo "replica $slot not found"; cat "$out/killed.log"; kill "$launcher"; exit 1; }
if [[ $fault == stop ]]; then  # once the others went on without it
  for _ in $(seq 1 1500); do
    grep -q '"event":"membership"' "$metrics" && break
    sleep 0.02
  done
  kill -CONT "$stopped"
fi

status=0
timeout 300 tail --pid="$launcher" -f /dev/null || true
wait "$launcher" || status=$?
[[ $status == 0 ]] || { cat "$out/killed.log"; echo "FAIL: launcher exited with $status"; exit 1; }
grep -q "restarting the group" "$out/killed.log" && { cat "$out/killed.log"; echo "FAIL: the group restarted"; exit 1; }

/usr/bin/python3 - "$out" "$slot" "$killed_at" "$timeout_s" "$fault" <<'EOF' || { cat "$out/killed.log"; exit 1; }
import json, statistics, sys
out, slot, killed_at, timeout_s, fault = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
events = [json.loads(l) for l in open(f"{out}/killed/metrics.jsonl")]
train = [e for e in events if e["event"] == "train"]
steps = [e["step"] for e in train]
if steps != list(range(1, 471)):
    missing = sorted(set(range(1, 471)) - set(steps))
    twice = sorted({s for s in steps if steps.count(s) > 1})
    sys.exit(f"FAIL: replica 0 logged {len(steps)} steps; missing {missing[:10]}, twice {twice[:10]}")
changes = [e for e in events if e["event"] == "membership"]
left = [c for c in changes if c["left"] == [slot]]
joined = [c for c in changes if c["joined"] == [slot]]
if len(left) != 1 or len(joined) != 1:
    sys.exit(f"FAIL: expected replica {slot} to leave once and join once: {changes}")
if left[0]["members"] != [s for s in range(4) if s != slot] or joined[0]["members"] != [0, 1, 2, 3]:
    sys.exit(f"FAIL: memberships {[c['members'] for c in changes]}")
# The survivors' next completed step: the first step past the one the loss interrupted.
after = next(e for e in train if e["step"] > left[0]["step"])
recovery = after["time"] - killed_at
if recovery > 2 * timeout_s:
    sys.exit(f"FAIL: {recovery:.2f} s from the kill to the next step, over 2 x parallel.timeout_s = {2 * timeout_s} s")
# The join's cost: the admission (agreement, connections, the state sent),
# which every member waits for at the step boundary, and what the 3 steps after
# it took beyond the median step (the replacement's first steps). The step that
# admitted it may also hold the survivors' agreement, so it counts by the former.
median = statistics.median(e["step_ms"] for e in train)
at = joined[0]["step"]
extra = joined[0]["seconds"] * 1e3 + sum(e["step_ms"] - median for e in train if at < e["step"] <= at + 3)
alone = json.load(open(f"{out}/alone.json"))
killed = json.load(open(f"{out}/killed.json"))
a, b = alone["eval"]["top1"], killed["eval"]["top1"]
if abs(a - b) > 0.01:
    sys.exit(f"FAIL: top-1 {b} after the loss vs {a} undisturbed (more than a point apart)")
print(f"replica {slot} {'stopped' if fault == 'stop' else 'killed'} after step {left[0]['step']}; survivors' next step {recovery:.2f} s after the kill "
      f"(agreement {left[0]['seconds']:.2f} s; limit {2 * timeout_s:.0f} s); replacement joined at step {at} in "
      f"{joined[0]['seconds'] * 1e3:.0f} ms, costing the job {extra:.0f} ms = {extra / median:.2f} step times "
      f"(median step {median:.1f} ms); top-1 {b} vs {a} undisturbed; final loss {killed['final_loss']:.4f} vs "
      f"{alone['final_loss']:.4f}")
EOF
echo "PASS: replica $slot ($fault), the job went on in-job and its replacement joined"
