#!/usr/bin/env bash
# `braid inspect checkpoint` on tiny char-transformer runs written by
# `braid train`: one process, and tensor x pipeline 2 x 2 through
# `braid launch`. The description must show the steps, shards and world; the
# sharded run's whole model must have as many elements, and consolidate into
# the same tensor names and shapes, as the one-process run's; a step one shard
# lacks is reported and passed over; a truncated shard fails the command,
# naming the file.
# usage: inspect_checkpoint.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-inspect-ckpt.XXXXXX)
trap 'rm -rf "$out"' EXIT
small=(--set model.d_model=16 --set model.n_heads=2 --set model.n_layers=1 --set model.context=16
       --set model.dropout=0 --set train.batch_size=4 --set train.max_steps=4 --set train.checkpoint_every=2
       --set train.eval_every=0 --set train.log_every=2 --set train.threads=1 --set train.progress=lines)
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }
expect() {  # expect FILE TEXT: FILE has the line fragment TEXT
  grep -qF -- "$2" "$1" || fail "$1 lacks '$2'" "$1"
}

timeout 300 "$braid" train "$config" "${small[@]}" --set train.out_dir="$out/one" >"$out/one.log" 2>&1 ||
  fail "one-process run" "$out/one.log"
timeout 300 "$braid" launch -n 4 -- "$braid" train "$config" "${small[@]}" --set parallel.tensor=2 \
  --set parallel.pipeline=2 --set parallel.microbatches=2 --set train.out_dir="$out/tp" >"$out/tp.log" 2>&1 ||
  fail "tensor x pipeline run" "$out/tp.log"

"$braid" inspect checkpoint "$out/one" >"$out/one.txt" || fail "inspect one" "$out/one.txt"
cat "$out/one.txt"
expect "$out/one.txt" "whole-model steps: 2, 4"
expect "$out/one.txt" "step 4 (whole model): epoch 0, 4 batches into it"
expect "$out/one.txt" "optimizer  adamw, 4 steps"

"$braid" inspect checkpoint "$out/tp" >"$out/tp.txt" || fail "inspect tp" "$out/tp.txt"
cat "$out/tp.txt"
expect "$out/tp.txt" "shard folders:     shard-t0-p0 shard-t0-p1 shard-t1-p0 shard-t1-p1"
expect "$out/tp.txt" "sharded steps:     2, 4"
expect "$out/tp.txt" "world      data 1 x tensor 2 x pipeline 2; data world 1"
[ "$(grep -c '^  shard-t' "$out/tp.txt")" = 8 ] || fail "4 shard rows per step" "$out/tp.txt"
elements() { grep -o 'model      [0-9]* elements' "$1" | tail -1; }
[ "$(elements "$out/one.txt")" = "$(elements "$out/tp.txt")" ] ||
  fail "whole-model elements differ: $(elements "$out/one.txt") vs $(elements "$out/tp.txt")"
"$braid" inspect checkpoint "$out/tp" --step 4 --format json >"$out/tp.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert [s['step'] for s in j['steps']]==[4], j" \
  "$out/tp.json" || fail "--step 4 --format json" "$out/tp.json"

# Consolidated, both runs give the same tensors, and braid reads them back.
for run in one tp; do
  "$braid" inspect checkpoint "$out/$run" --consolidate "$out/$run.safetensors" >"$out/$run.wrote"
  cat "$out/$run.wrote"
  expect "$out/$run.wrote" "wrote $out/$run.safetensors: step 4"
  "$braid" inspect safetensors "$out/$run.safetensors" >"$out/$run.st" || fail "read back $run" "$out/$run.st"
  expect "$out/$run.st" "checksum ok"
  expect "$out/$run.st" "metadata format = braid-consolidated"
  grep '^  [^m]' "$out/$run.st" >"$out/$run.tensors"  # name, dtype, shape: not the metadata
done
expect "$out/tp.wrote" "merged from 4 shards"
diff "$out/one.tensors" "$out/tp.tensors" || fail "the consolidated runs' tensors differ"

# A step one shard lacks: reported, and consolidation takes the newest complete one.
rm "$out/tp/shard-t1-p1/ckpt-00000004.json"
"$braid" inspect checkpoint "$out/tp" >"$out/lack.txt"
expect "$out/lack.txt" "step 4 is incomplete, missing from shard-t1-p1"
"$braid" inspect checkpoint "$out/tp" --consolidate "$out/lack.safetensors" >"$out/lack.wrote"
expect "$out/lack.wrote" "step 2 (merged from 4 shards)"

# A shard cut in the middle: the command fails naming the file.
st="$out/tp/shard-t0-p1/ckpt-00000002.safetensors"
truncate -s $(( $(stat -c %s "$st") / 2 )) "$st"
if "$braid" inspect checkpoint "$out/tp" >"$out/cut.txt" 2>&1; then fail "a truncated shard passed" "$out/cut.txt"; fi
expect "$out/cut.txt" "$st"
if "$braid" inspect checkpoint "$out/tp" --consolidate "$out/cut.safetensors" >"$out/cut2.txt" 2>&1; then
  fail "a truncated shard consolidated" "$out/cut2.txt"
fi
expect "$out/cut2.txt" "$st"
[ ! -e "$out/cut.safetensors" ] || fail "a file was written from a truncated shard"
echo "ok: inspect checkpoint"
