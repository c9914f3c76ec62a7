#!/usr/bin/env bash
# parallel.strategy = ensemble through `braid launch`: 3 members train a
# small Fashion-MNIST MLP alone for 300 steps each, are scored alone and as
# an ensemble, and one student is distilled from them for 300 steps. Member 0
# must report every member's test accuracy, the ensemble's (at this budget
# 0.3-0.6 points above the mean member over seeds 1-6, so >= holds with room)
# and the student's; the summary must show no byte sent while training and
# an ensemble loss below the members' mean (Jensen: -log of a mean is at most
# the mean of -logs). Each member and the student checkpoint to their own
# folder, and the student's loads in `braid inspect checkpoint`. Then the same
# members run with shards of the data (ensemble.data = shard) and without a
# student.
# usage: ensemble_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-ensemble-launch.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }
small=(--set parallel.strategy=ensemble --set model.hidden=64 --set train.max_steps=300 --set train.threads=1
       --set train.progress=lines --set train.log_every=100)

log="$out/whole.log"
timeout 300 "$braid" launch -n 3 -- "$braid" train "$config" "${small[@]}" --set distill.epochs=1 \
  --set train.out_dir="$out/whole" --summary-json "$out/whole.json" >"$log" 2>&1 || fail "the ensemble run" "$log"
for m in 0 1 2; do
  grep -Eq "ensemble member $m: test top-1 0\.[0-9]{4}, loss [0-9.]+" "$log" || fail "no test accuracy for member $m" "$log"
  ls "$out/whole/member-$m"/ckpt-00000300.json >/dev/null 2>&1 || fail "member $m wrote no checkpoint" "$log"
done
grep -Eq "ensemble of 3 members: test top-1 0\.[0-9]{4}" "$log" || fail "no ensemble accuracy" "$log"
grep -Eq "student mlp hidden 64: test top-1 0\.[0-9]{4}" "$log" || fail "no student accuracy" "$log"
/usr/bin/python3 - "$out/whole.json" <<'EOF' || fail "summary" "$out/whole.json"
import json, sys
s = json.load(open(sys.argv[1]))
e, a = s["ensemble"], s["aggregation"]
tops = [m["top1"] for m in e["members"]]
assert len(tops) == 3 and len(set(tops)) > 1, e  # members differ
mean = sum(tops) / 3
assert e["top1"] >= mean, f"ensemble top-1 {e['top1']} below the mean member's {mean}"
assert e["loss"] < sum(m["loss"] for m in e["members"]) / 3, e
assert a["bytes_sent_training"] == 0 and a["bytes_sent"] > 0 and a["steps"] == 300, a
assert s["student"]["steps"] == 300 and s["student"]["eval"]["top1"] > 0.7, s["student"]
print(f"ok: members {tops}, ensemble {e['top1']} (+{100 * (e['top1'] - mean):.2f} points), "
      f"student {s['student']['eval']['top1']}")
EOF
"$braid" inspect checkpoint "$out/whole/student" >"$out/inspect.log" 2>&1 || fail "inspect the student" "$out/inspect.log"
grep -q "whole-model steps: 300" "$out/inspect.log" || fail "the student's checkpoint" "$out/inspect.log"

log="$out/shard.log"
timeout 300 "$braid" launch -n 3 -- "$braid" train "$config" "${small[@]}" --set ensemble.data=shard \
  --set train.max_steps=100 --set train.out_dir="$out/shard" >"$log" 2>&1 || fail "the sharded ensemble" "$log"
grep -q "each on its 1/K shard of the training set" "$log" || fail "not sharded" "$log"
grep -Eq "ensemble of 3 members: test top-1 0\.[0-9]{4}" "$log" || fail "no sharded ensemble accuracy" "$log"
if grep -q "student" "$log"; then fail "a student without distill.epochs" "$log"; fi
echo "ensemble_launch: ok"
