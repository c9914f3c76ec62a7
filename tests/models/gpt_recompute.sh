#!/usr/bin/env bash
# Activation recompute under every plan, through `braid train` and `braid
# launch` (docs/memory.md): a tiny GPT-2-layout model with dropout 0.1 trains
# 4 steps with parallel.recompute = none, full and selective under one
# process, DP=2, ZeRO-3, TP=2 and PP=2; every step's training loss (full
# precision, metrics.jsonl) must equal the same plan's without recompute, so
# the gradients were equal (train.deterministic pins the kernels). Then the
# measured peak activation memory of one process must fall none > selective >
# full, and agree with the dry-run planner's prediction within 10%.
# usage: gpt_recompute.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-gpt-recompute.XXXXXX)
trap 'rm -rf "$out"' EXIT
files=(/usr/share/games/fortunes/computers /usr/share/games/fortunes/science)
"$braid" tokenize train --vocab-size 300 --out "$out/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$out/tok" --out "$out/shards/train" "${files[@]}" >/dev/null
cat >"$out/tiny.toml" <<TOML
[train]
batch_size = 8
max_steps = 4
log_every = 1
eval_every = 0
threads = 1
progress = "lines"
deterministic = true
[model]
name = "gpt"
n_layers = 2
n_heads = 4
d_model = 64
context = 64
dropout = 0.1
[optim]
name = "sgd"
lr = 0.5
momentum = 0.0
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
TOML
run() {  # run NAME PROCESSES KEY=VALUE...: trains; prints every step's loss from rank 0's metrics
  local name=$1 n=$2; shift 2
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --set train.out_dir="$out/$name" "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; echo "FAIL: $name" >&2; exit 1; }
  /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]
print(" ".join(repr(r["loss"]) for r in rows))' "$out/$name/metrics.jsonl"
}
plans=(
  "one 1"
  "dp2 2 train.batch_size=4"
  "zero3 2 train.batch_size=4 parallel.strategy=zero parallel.zero_stage=3"
  "tp2 2 parallel.tensor=2"
  "pp2 2 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2"
)
for p in "${plans[@]}"; do
  read -r -a a <<<"$p"
  want=$(run "${a[0]}_none" "${a[@]:1}")
  for mode in full selective; do
    got=$(run "${a[0]}_$mode" "${a[@]:1}" parallel.recompute=$mode)
    if [ "$got" != "$want" ]; then echo "FAIL: ${a[0]} $mode: losses $got, without recompute $want"; exit 1; fi
  done
  echo "ok: ${a[0]}: full and selective losses equal none's: $want"
done
# Only the first block: still the same steps.
got=$(run one_first1 1 parallel.recompute=full parallel.recompute_layers=1)
[ "$got" = "$(run one_none 1)" ] || { echo "FAIL: recompute_layers=1 changed the losses"; exit 1; }

# Measured peak (the last step's) against the planner, per mode.
declare -A measured
for mode in none selective full; do
  run "mem_$mode" 1 parallel.recompute=$mode >/dev/null
  measured[$mode]=$(/usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]
print(rows[-1]["peak_activation_bytes"])' "$out/mem_$mode/metrics.jsonl")
  "$braid" train "$out/tiny.toml" --dry-run --set parallel.recompute=$mode >"$out/plan_$mode.log" 2>&1 ||
    { cat "$out/plan_$mode.log"; echo "FAIL: dry run $mode"; exit 1; }
  planned=$(grep -Eo "activations peak .*\(([0-9]+) bytes" "$out/plan_$mode.log" | grep -Eo "\(([0-9]+)" | tr -d '(')
  /usr/bin/python3 -c "import sys; m, p = ${measured[$mode]}, $planned; sys.exit(0 if abs(p - m) <= 0.1 * m else 1)" ||
    { cat "$out/plan_$mode.log"; echo "FAIL: $mode: planned $planned bytes, measured ${measured[$mode]}"; exit 1; }
  echo "ok: $mode: peak activations measured ${measured[$mode]} bytes, planned $planned"
done
[ "${measured[full]}" -lt "${measured[selective]}" ] && [ "${measured[selective]}" -lt "${measured[none]}" ] ||
  { echo "FAIL: peaks not full < selective < none: ${measured[full]} ${measured[selective]} ${measured[none]}"; exit 1; }
echo "ok: peak activations full ${measured[full]} < selective ${measured[selective]} < none ${measured[none]}"
