#!/usr/bin/env bash
# `braid sim` of a gpt under tensor parallelism with sequence parallelism
# (docs/sim.md, "Tensor and sequence parallelism"): the plan line says which,
# the timeline has the all-gathers and reduce-scatters (plain TP: all-reduces)
# and, with parallel.tp_overlap, their chunks; over a slow link of little
# latency the overlapped step is the shorter (each chunk pays the latency
# again: on a link of 60 us this model's products, a few us a chunk, gain
# less than the three more latencies cost); sequence parallelism without a tensor axis
# is refused naming the keys.
# Usage: sequence_parallel_cli.sh BRAID
set -euo pipefail
braid=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CACHE_DIR=$tmp/cache
fail() { echo "FAIL: $*"; exit 1; }

files=(/usr/share/games/fortunes/computers)
"$braid" tokenize train --vocab-size 300 --out "$tmp/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$tmp/tok" --out "$tmp/shards/train" "${files[@]}" >/dev/null
cat >"$tmp/gpt.toml" <<TOML
[train]
batch_size = 4
threads = 1
[model]
name = "gpt"
n_layers = 2
n_heads = 4
d_model = 64
context = 32
[optim]
name = "sgd"
lr = 0.1
[data]
name = "tokens"
path = "$tmp/shards/train-*.tok"
TOML
slow=(--world 2 --hosts 2 --cores 1 --link 100Mbit/s,1us --no-calibrate --set parallel.tensor=2)
step() {  # step SP OVERLAP: the predicted step in ms; the trace in $tmp/SP-OVERLAP.json
  local out
  out=$("$braid" sim "$tmp/gpt.toml" "${slow[@]}" --set "parallel.sequence_parallel=$1" \
    --set "parallel.tp_overlap=$2" --trace "$tmp/$1-$2.json")
  local want="plain TP"
  [ "$1" = true ] && want="sequence parallel"
  grep -q "($want, collectives $([ "$2" = true ] && echo overlapped || echo blocking)\|($want, blocking)" <<<"$out" ||
    fail "plan line for sp=$1 overlap=$2: $out"
  grep -Eo "predicted step: [0-9.]+" <<<"$out" | grep -Eo "[0-9.]+$"
}
names() {  # names TRACE: the tensor-parallel collectives' task names
  /usr/bin/python3 -c '
import json, sys
print("\n".join(sorted({e["name"] for e in json.load(open(sys.argv[1]))["traceEvents"]
                        if e.get("ph") == "X" and e["name"].startswith("tp ")})))' "$1"
}
for sp in true false; do
  blocking=$(step $sp false)
  overlap=$(step $sp true)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $overlap < $blocking else 1)" ||
    fail "sp=$sp: overlapped $overlap ms is not shorter than blocking $blocking ms"
  echo "ok: sp=$sp: predicted step overlapped $overlap ms, blocking $blocking ms"
done
sp=$(names "$tmp/true-false.json")
chunked=$(names "$tmp/true-true.json")
plain=$(names "$tmp/false-false.json")
grep -q "^tp attention s0 allgather" <<<"$sp" || fail "no all-gather: $sp"
grep -q "^tp attention s0 reduce-scatter" <<<"$sp" || fail "no reduce-scatter: $sp"
# The vocabulary-parallel loss's row reductions are the only all-reduces left.
if grep "allreduce\| ring " <<<"$sp" | grep -qv "^tp loss"; then fail "a block all-reduce under sequence parallelism: $sp"; fi
grep -q "^tp attention 1/4 s0 allgather" <<<"$chunked" || fail "no chunks: $chunked"
# (A ring all-reduce's two phases are named "ring reduce-scatter" and "ring allgather".)
grep -q "^tp attention s0 ring" <<<"$plain" || fail "plain TP without its all-reduce: $plain"
echo "ok: the timelines hold all-gathers and reduce-scatters, chunked when overlapped, all-reduces under plain TP"

# The sweep of a sequence-parallel config runs its plans without a tensor axis without it.
sweep=$("$braid" sim "$tmp/gpt.toml" --world 2 --no-calibrate --set parallel.tensor=2 \
  --set parallel.sequence_parallel=true --sweep)
grep -q "data 2 x tensor 1 x pipeline 1" <<<"$sweep" || fail "the sweep has no data-parallel plan: $sweep"
grep -q "data 1 x tensor 2 x pipeline 1" <<<"$sweep" || fail "the sweep has no tensor-parallel plan: $sweep"
echo "ok: the sweep ranks data- and tensor-parallel plans"

if "$braid" sim "$tmp/gpt.toml" --world 1 --no-calibrate --set parallel.sequence_parallel=true 2>"$tmp/err"; then
  fail "sequence parallelism without a tensor axis accepted"
fi
grep -q "parallel.sequence_parallel.*parallel.tensor" "$tmp/err" || fail "refusal does not name the keys: $(cat "$tmp/err")"
echo "PASS"
