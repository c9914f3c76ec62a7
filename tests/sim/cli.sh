#!/usr/bin/env bash
# `braid sim` from the command line: a prediction with its breakdown and the
# in-host link measured, a second prediction that measures nothing (the op
# table is kept), gradient accumulation, hosts charged TCP's CPU, the
# simulated timeline as trace JSON, a pipeline and a parameter-server plan, a
# sweep, refusals that name what is wrong, and --validate running the job for
# real under braid launch.
# Usage: cli.sh BRAID CONFIG_DIR
set -euo pipefail
braid=$1
configs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CACHE_DIR=$tmp/cache
fail() { echo "FAIL: $*"; exit 1; }

out=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --trace "$tmp/trace.json" --json "$tmp/p.json")
echo "$out"
grep -q "predicted step: .* = compute .* + exposed communication .* + waits" <<<"$out" || fail "no prediction"
grep -q "measured now" <<<"$out" || fail "no op table line"
# This machine's shm transport measured: alpha, beta and the CPU each end pays.
grep -q "in-host .* GB/s, .* (CPU .* + .* ns/B each end)" <<<"$out" || fail "the in-host link was not measured: $out"
/usr/bin/python3 - "$tmp/trace.json" "$tmp/p.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
x = [e for e in t["traceEvents"] if e.get("ph") == "X"]
assert {e["pid"] for e in x} == {0, 1}, "a row per rank"
assert any(e["name"].startswith("bucket") for e in x), "the gradient all-reduce is on the timeline"
p = json.load(open(sys.argv[2]))["prediction"]
parts = p["compute_s"] + p["exposed_comm_s"] + p["waits_s"]
assert abs(parts - p["step_s"]) <= 1e-9 + 1e-6 * p["step_s"], (parts, p["step_s"])
PY
again=$("$braid" sim "$configs/fashion_mlp.toml" --world 2)
grep -q "(.* entries, 0 measured now)" <<<"$again" || fail "the second prediction measured ops again: $again"

pp=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --set parallel.pipeline=2 --set parallel.microbatches=4)
grep -q "1f1b with 4 micro-batches" <<<"$pp" || fail "pipeline plan: $pp"
grep -q "waits 0.000 ms" <<<"$pp" && fail "a pipeline without bubbles: $pp"
ps=$("$braid" sim "$configs/fashion_mlp.toml" --world 3 --servers 1 --set parallel.strategy=ps --set ps.consistency=asp)
grep -q "ps asp (1 servers, 2 workers)" <<<"$ps" || fail "ps plan: $ps"
acc=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --set parallel.microbatches=2)
grep -q "gradients of 2 micro-batches accumulated" <<<"$acc" || fail "accumulation plan: $acc"
# Hosts that are namespaces of this machine: their TCP's CPU charged between them.
ns=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --hosts 2 --link 1Gbit/s,60us --link-cpu tcp)
grep -q "between hosts .* (CPU .* each end)" <<<"$ns" || fail "--link-cpu tcp: $ns"

sweep=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --sweep)
grep -q "^sweep: .* plans on 2 ranks" <<<"$sweep" || fail "no sweep table"
grep -q "^   1  " <<<"$sweep" || fail "the sweep ranks nothing"

if "$braid" sim "$configs/fashion_mlp.toml" --world 2 --set parallel.strategy=gossip 2>"$tmp/err"; then
  fail "gossip is not modelled, yet accepted"
fi
grep -q "not modelled" "$tmp/err" || fail "refusal does not say why: $(cat "$tmp/err")"
if "$braid" sim "$configs/fashion_mlp.toml" --world 2 --link 10parsecs 2>"$tmp/err"; then fail "bad link accepted"; fi
grep -q "10parsecs" "$tmp/err" || fail "bad link not named: $(cat "$tmp/err")"

val=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --validate --reps 1 --validate-steps 30)
grep -q "predicted .* ms, measured .* ms" <<<"$val" || fail "no validation line: $val"
echo "PASS"
