#!/usr/bin/env bash
# Activation recompute under every plan, through `braid train` and `braid
# launch` (docs/memory.md): a tiny GPT-2-layout model with dropout 0.1 trains
# 4 steps with parallel.recompute = none, full and selective under one
# process, DP=2, ZeRO-3, TP=2 (plain and with sequence parallelism), PP=2
# and CP=2 (ring; without dropout, which
# context parallelism refuses); every step's training loss (full
# precision, metrics.jsonl) must equal the same plan's without recompute, so
# the gradients were equal (train.deterministic pins the kernels). Rank 0's
# measured peak activation memory must fall none > selective > full under
# every plan and agree with the dry-run planner's prediction within 10%.
# usage: gpt_recompute.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-gpt-recompute.XXXXXX)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
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
peak() {  # peak NAME: rank 0's measured peak activation bytes at the last step
  /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]
print(rows[-1]["peak_activation_bytes"])' "$out/$1/metrics.jsonl"
}
planned() {  # planned NAME PROCESSES KEY=VALUE...: rank 0's planned peak activation bytes (braid train --dry-run)
  local name=$1 n=$2; shift 2
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --dry-run "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.plan" 2>&1 || { cat "$out/$name.plan" >&2; echo "FAIL: dry run $name" >&2; exit 1; }
  grep -A6 "memory plan of rank 0" "$out/$name.plan" | grep -Eo "activations peak .*\(([0-9]+) bytes" | grep -Eo "\([0-9]+" |
    tr -d "("
}
within() {  # within NAME MEASURED PLANNED: the plan within 10% of the run
  /usr/bin/python3 -c "import sys; m, p = $2, $3; sys.exit(0 if abs(p - m) <= 0.1 * m else 1)" ||
    { echo "FAIL: $1: planned $3 bytes, measured $2"; exit 1; }
}
plans=(
  "one 1"
  "dp2 2 train.batch_size=4"
  "zero3 2 train.batch_size=4 parallel.strategy=zero parallel.zero_stage=3"
  "tp2 2 parallel.tensor=2"
  "tp2sp 2 parallel.tensor=2 parallel.sequence_parallel=true"
  "pp2 2 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2"
  "cp2 2 parallel.context=2 model.dropout=0"
)
declare -A measured
for p in "${plans[@]}"; do
  read -r -a a <<<"$p"
  want=$(run "${a[0]}_none" "${a[@]:1}")
  for mode in none full selective; do
    if [ "$mode" != none ]; then
      got=$(run "${a[0]}_$mode" "${a[@]:1}" parallel.recompute=$mode)
      if [ "$got" != "$want" ]; then echo "FAIL: ${a[0]} $mode: losses $got, without recompute $want"; exit 1; fi
    fi
    # Rank 0's measured peak (the last step's) against its plan.
    m=$(peak "${a[0]}_$mode")
    p=$(planned "${a[0]}_$mode" "${a[@]:1}" parallel.recompute=$mode)
    # The plan leaves out context parallelism's ring buffers and whole-sequence
    # embedding lookup (docs/memory.md): its figure is not held to 10%.
    [ "${a[0]}" = cp2 ] || within "${a[0]} $mode" "$m" "$p"
    measured[${a[0]}_$mode]=$m
    echo "ok: ${a[0]} $mode: peak activations of rank 0 measured $m bytes, planned $p"
  done
  echo "ok: ${a[0]}: full and selective losses equal none's: $want"
  [ "${measured[${a[0]}_full]}" -lt "${measured[${a[0]}_selective]}" ] &&
    [ "${measured[${a[0]}_selective]}" -lt "${measured[${a[0]}_none]}" ] ||
    { echo "FAIL: ${a[0]}: peaks not full < selective < none"; exit 1; }
done
# Only the first block: still the same steps.
got=$(run one_first1 1 parallel.recompute=full parallel.recompute_layers=1)
[ "$got" = "$(run one_none 1)" ] || { echo "FAIL: recompute_layers=1 changed the losses"; exit 1; }
echo "ok: recompute_layers = 1 gives the same losses"
