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
files=(/usr/share/games/fortunes/computers /usr/share/games/fortunes/science)
"$braid" tokenize train --vocab-size 300 --out "$out/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$out/tok" --out "$out/shards/train" "${files[@]}" >/dev/null
cat >"$out/tiny.toml" <<TOML
[train]
batch_size = 8
max_steps = 6
log_every = 3
eval_every = 6
eval_steps = 5
threads = 1
progress = "lines"
deterministic = true
[model]
name = "gpt"
n_layers = 4
n_heads = 4
d_model = 32
context = 16
tie_embeddings = false
[optim]
name = "sgd"
lr = 0.5
momentum = 0.0
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
TOML
loss() {  # loss NAME PROCESSES KEY=VALUE...: prints rank 0's final held-out loss
  local name=$1 n=$2; shift 2
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --set train.out_dir="$out/$name" "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; echo "FAIL: $name" >&2; exit 1; }
  grep -Eo "final test loss [0-9.]+" "$out/$name.log" | head -1 | awk '{print $4}'
}
same() {  # same NAME GOT WANT
  if [ "$2" != "$3" ]; then echo "FAIL: $1: held-out loss $2, one process $3"; exit 1; fi
  echo "ok: $1: $2 (one process $3)"
}
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
