#!/usr/bin/env bash
# `braid sim --world 1024` with no cluster description answers in seconds and
# says which cluster it assumed (hosts of 8 ranks), rather than placing every
# rank on this machine (5 min 25 s on 2 cores); a described cluster gets no
# such note, and a world that fits this machine stays on it.
# Usage: large_world.sh BRAID CONFIG_DIR [SECONDS]
set -euo pipefail
braid=$1
configs=$2
limit=${3:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CACHE_DIR=$tmp/cache  # a fresh op table: the ops are measured too
unset BRAID_THREADS  # train.threads = 0: a core per rank on the assumed hosts
fail() { echo "FAIL: $*"; exit 1; }

start=$(date +%s.%N)
out=$(timeout $((limit * 2)) "$braid" sim "$configs/fashion_mlp.toml" --world 1024 --json "$tmp/p.json") ||
  fail "braid sim --world 1024 exited with $?: $out"
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
echo "$out"
echo "braid sim --world 1024: $took s"
python3 -c "import sys; sys.exit(0 if $took < $limit else 1)" || fail "took $took s (limit $limit s)"
grep -q "^cluster: 1024 ranks on 128 hosts (8 per host) of 8 cores" <<<"$out" || fail "the cluster line: $out"
grep -q "^note: --world 1024 without --hosts or --ranks-per-host: assumed 128 hosts of 8 ranks, 8 cores each" <<<"$out" ||
  fail "the output does not say which cluster it assumed: $out"
python3 -c "import json, sys; sys.exit(0 if json.load(open('$tmp/p.json'))['cluster_assumed'] else 1)" ||
  fail "--json does not say the cluster was assumed"

# Described: no assumption, whatever the size.
described=$("$braid" sim "$configs/fashion_mlp.toml" --world 64 --ranks-per-host 16 --cores 16 --no-calibrate)
grep -q "^cluster: 64 ranks on 4 hosts (16 per host) of 16 cores" <<<"$described" || fail "described: $described"
grep -q "assumed" <<<"$described" && fail "a described cluster was assumed: $described"
# Small: this machine.
small=$("$braid" sim "$configs/fashion_mlp.toml" --world 2 --no-calibrate)
grep -q "^cluster: 2 ranks on 1 host " <<<"$small" || fail "2 ranks left this machine: $small"
grep -q "assumed" <<<"$small" && fail "a small world was assumed a cluster: $small"
echo "PASS"
