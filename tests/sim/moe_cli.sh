#!/usr/bin/env bash
# `braid sim` of a gpt with MoE layers (docs/sim.md, "Mixture of experts"):
# expert parallelism predicted with its all-to-alls on the timeline, one
# expert group equal to the plan without it, the sweep trying expert degrees,
# and a degree that does not divide the experts refused naming the keys.
# Usage: moe_cli.sh BRAID
set -euo pipefail
braid=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CACHE_DIR=$tmp/cache
fail() { echo "FAIL: $*"; exit 1; }

files=(/usr/share/games/fortunes/computers)
"$braid" tokenize train --vocab-size 300 --out "$tmp/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$tmp/tok" --out "$tmp/shards/train" "${files[@]}" >/dev/null
cat >"$tmp/moe.toml" <<TOML
[train]
batch_size = 8
threads = 1
[model]
name = "gpt"
n_layers = 2
n_heads = 4
d_model = 32
context = 16
moe.experts = 4
moe.top_k = 2
[optim]
name = "sgd"
lr = 0.1
[data]
name = "tokens"
path = "$tmp/shards/train-*.tok"
TOML

ep=$("$braid" sim "$tmp/moe.toml" --world 2 --set parallel.strategy=allreduce --set parallel.expert=2 \
  --trace "$tmp/trace.json")
echo "$ep"
grep -q "expert groups of 2" <<<"$ep" || fail "no expert groups in the plan: $ep"
grep -q "predicted step: " <<<"$ep" || fail "no prediction: $ep"
/usr/bin/python3 - "$tmp/trace.json" <<'PY'
import json, sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
for what in ("ep counts", "ep dispatch", "ep combine", "ep combine grad", "ep dispatch grad"):
    assert any(e["name"].startswith(what) for e in x), f"no {what} on the timeline"
assert any("experts F" in e["name"] for e in x) and any("experts B" in e["name"] for e in x), "no expert compute"
PY
one=$("$braid" sim "$tmp/moe.toml" --world 2 --set parallel.strategy=allreduce)
grep -q "expert groups" <<<"$one" && fail "expert groups without parallel.expert: $one"
grep -q "predicted step: " <<<"$one" || fail "no prediction for the MoE model with every expert on every rank: $one"

# The sweep prints its best 20: count its plans against the same model with
# 3 experts, which no expert degree of 2, 4, 8 divides.
plans() { "$braid" sim "$tmp/moe.toml" --world 4 --sweep "$@" | sed -n 's/^sweep: \([0-9]*\) plans.*/\1/p'; }
with=$(plans)
without=$(plans --set model.moe.experts=3)
echo "sweep: $with plans with 4 experts, $without with 3"
# data 4 x expert 2 and 4, and expert 2 on each pipeline of data 2: at least 3 more.
[ "$with" -ge $((without + 3)) ] || fail "the sweep added $((with - without)) expert-parallel plans"

if "$braid" sim "$tmp/moe.toml" --world 3 --set parallel.strategy=allreduce --set parallel.expert=3 2>"$tmp/err"; then
  fail "parallel.expert = 3 of 4 experts accepted"
fi
grep -q "model.moe.experts = 4 is not divisible by parallel.expert = 3" "$tmp/err" || fail "refusal: $(cat "$tmp/err")"
echo "PASS"
