#!/usr/bin/env bash
# Router balance of a small MoE gpt on the fortunes corpus (docs/moe.md,
# "Measurements"): a 4-block gpt of width 64, 8 experts top-2 in every block,
# batch 8 of 16 tokens, AdamW at 3e-3, 200 steps, one thread; per balancing
# setting, the max/mean tokens per expert of each 20-step window (the largest
# over the layers, from metrics.jsonl) and the final train and held-out loss.
# usage: bench/moe/balance.sh BRAID_BINARY [SETTING...]
#   SETTING: aux=COEF (model.moe.aux_loss) or bias=RATE (model.moe.balance = bias);
#   default: aux=0.01 aux=1.0 bias=0.001 bias=0.01
set -euo pipefail
braid=$1; shift
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(aux=0.01 aux=1.0 bias=0.001 bias=0.01)
out=$(mktemp -d /tmp/braid-moe-balance.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
files=(/usr/share/games/fortunes/computers /usr/share/games/fortunes/science)
"$braid" tokenize train --vocab-size 300 --out "$out/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$out/tok" --out "$out/shards/train" "${files[@]}" >/dev/null
cat >"$out/moe.toml" <<TOML
[train]
batch_size = 8
max_steps = 200
log_every = 20
eval_every = 1000
threads = 1
progress = "lines"
deterministic = true
[model]
name = "gpt"
n_layers = 4
n_heads = 4
d_model = 64
context = 16
moe.experts = 8
moe.top_k = 2
[optim]
name = "adamw"
lr = 3e-3
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
TOML
for s in "${settings[@]}"; do
  kind=${s%%=*} value=${s#*=}
  case $kind in
    aux) sets=(--set model.moe.aux_loss="$value") ;;
    bias) sets=(--set model.moe.balance=bias --set model.moe.bias_rate="$value") ;;
    *) echo "unknown setting $s" >&2; exit 2 ;;
  esac
  "$braid" train "$out/moe.toml" --set train.out_dir="$out/$s" "${sets[@]}" >"$out/$s.log" 2>&1 ||
    { cat "$out/$s.log" >&2; exit 1; }
  /usr/bin/python3 - "$out/$s/metrics.jsonl" "$s" "$out/$s.log" <<'PY'
import json, re, sys
ratios = [round(r["max_over_mean"], 2) for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "moe"]
log = open(sys.argv[3]).read()
test = re.findall(r"final test loss ([0-9.]+)", log)
train = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "train" and "loss" in r]
print(f"{sys.argv[2]:>10}: max/mean per 20-step window {ratios}; last train loss "
      f"{train[-1] if train else float('nan'):.3f}, held-out {test[0] if test else '?'}")
PY
done
