#!/usr/bin/env bash
# The skeleton partition through `braid launch` over tcp on loopback: 3
# workers train a small Fashion-MNIST MLP with parallel.strategy = skeleton,
# checkpointing between merges; the run must print its plan, the bytes it
# exchanged against full averaging (less), the merged model's accuracy and
# the same figures in --summary-json. The group then resumes from its last
# checkpoint, and 4 workers run it on the data axis of a two-stage pipeline.
# usage: skeleton_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-skeleton-launch.XXXXXX)
trap 'rm -rf "$out"' EXIT
small=(--set model.hidden=32 --set train.batch_size=32 --set train.log_every=10 --set train.threads=1
       --set train.progress=lines --set train.checkpoint_every=15 --set parallel.transport=tcp
       --set parallel.strategy=skeleton --set parallel.skeleton_fraction=0.1 --set parallel.skeleton_every=10
       --set train.out_dir="$out/run")
run() {  # run NAME WORKERS KEY=VALUE...
  local name=$1 n=$2; shift 2
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  timeout 300 "$braid" launch -n "$n" -- "$braid" train "$config" "${small[@]}" "${sets[@]}" \
    --summary-json "$out/$name.json" >"$out/$name.log" 2>&1 || { cat "$out/$name.log"; echo "FAIL: $name"; exit 1; }
  local log="$out/$name.log"
  grep -q "plan: .*aggregation skeleton" "$log" || { cat "$log"; echo "FAIL: $name printed no skeleton plan"; exit 1; }
  local line
  line=$(grep -E "skeleton partition: [0-9]+ of [0-9]+ entries in the skeleton, [0-9]+ merges? in [0-9]+ steps; [0-9]+ bytes sent per rank per step, full averaging [0-9]+ \(0\.[0-9]+x\)" "$log") ||
    { cat "$log"; echo "FAIL: $name reported no bytes below full averaging"; exit 1; }
  grep -Eq "final test accuracy: top-1 0\.[0-9]+" "$log" || { cat "$log"; echo "FAIL: $name has no test accuracy"; exit 1; }
  /usr/bin/python3 - "$out/$name.json" <<'EOF' || { cat "$out/$name.json"; echo "FAIL: $name summary"; exit 1; }
import json, sys
a = json.load(open(sys.argv[1]))["aggregation"]
assert 0 < a["bytes_per_step"] < a["full_averaging_bytes_per_step"], a
assert a["merges"] >= 1 and a["skeleton_entries"] < a["entries"], a
EOF
  echo "ok: $name: $line; $(grep -o 'final test accuracy: top-1 [0-9.]*' "$log")"
}
run first 3 train.max_steps=30
run resumed 3 train.max_steps=40 train.resume=auto
grep -q "resumed from .*(step 30," "$out/resumed.log" || { cat "$out/resumed.log"; echo "FAIL: not resumed from step 30"; exit 1; }
rm -rf "$out/run"
run pipeline 4 train.max_steps=20 parallel.pipeline=2 parallel.microbatches=2
