#!/usr/bin/env bash
# The interleaved and zero-bubble pipeline schedules through `braid launch`:
# a tiny gpt (4 blocks, untied head: 7 layers) on shards of two fortune
# files, 6 SGD steps; each run's held-out loss must equal one process's to
# 4 decimals (the micro-batches change only the last bits of the sums), the
# zero-bubble run's trace must hold its B and W spans, and the interleaved
# schedule must refuse micro-batches that are not a multiple of the stages,
# naming the keys.
# usage: pipeline_schedules_launch.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-pp-schedules.XXXXXX)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/../models/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 4 "tie_embeddings = false"
one=$(loss single 1)
same interleaved_p2_v2 "$(loss il2 2 parallel.pipeline=2 parallel.schedule=interleaved parallel.virtual_stages=2 \
  parallel.microbatches=4)" "$one"
same zero_bubble_p2 "$(loss zb2 2 parallel.pipeline=2 parallel.schedule=zero_bubble parallel.microbatches=4 \
  train.trace=true)" "$one"
same zero_bubble_p4 "$(loss zb4 4 parallel.pipeline=4 parallel.schedule=zero_bubble parallel.microbatches=4)" "$one"
# Each stage's trace: a B and a W span per micro-batch and step (6 steps x 4).
for r in 0 1; do
  f=$(ls "$out"/zb2/trace/rank-$r*.json 2>/dev/null | head -1)
  [ -n "$f" ] || { ls -R "$out/zb2" >&2; echo "FAIL: no trace of rank $r"; exit 1; }
  b=$(grep -o '"name":"backward B"' "$f" | wc -l); w=$(grep -o '"name":"backward W"' "$f" | wc -l)
  if [ "$b" -lt 24 ] || [ "$w" -lt 24 ]; then echo "FAIL: rank $r trace has $b B and $w W spans (want 24 each)"; exit 1; fi
  echo "ok: rank $r trace: $b backward B, $w backward W spans"
done
if "$braid" launch -n 2 -- "$braid" train "$out/tiny.toml" --set train.out_dir="$out/bad" --set parallel.pipeline=2 \
  --set parallel.schedule=interleaved --set parallel.virtual_stages=2 --set parallel.microbatches=3 >"$out/bad.log" 2>&1; then
  echo "FAIL: interleaved with 3 micro-batches on 2 stages ran"; exit 1
fi
grep -q "parallel.microbatches = 3 must be a multiple" "$out/bad.log" ||
  { cat "$out/bad.log"; echo "FAIL: the refusal does not name the keys"; exit 1; }
echo "ok: interleaved refuses M = 3 on P = 2"
