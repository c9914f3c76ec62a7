#!/usr/bin/env bash
# The tcp transport with several streams per peer (BRAID_TCP_STREAMS): 2 ranks
# on this host, `braid bench collective --op allreduce --transport tcp`, runs
# alternating between the stream counts (the machine is shared and noisy) and
# the median of REPS per count and size. Prints the load average before and
# after; run tcp_loopback_ceiling alongside for what loopback TCP can do at all.
#
#   bench/tcp_streams.sh [BUILD_DIR] [REPS] [-- extra `bench collective` args]
# Env: STREAMS ("1 2 4"), SIZES (1M,4M,16M,64M), RANKS (2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
reps=${2:-3}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = -- ] && shift
streams=${STREAMS:-1 2 4} sizes=${SIZES:-1M,4M,16M,64M} ranks=${RANKS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < reps; r++)); do
  for k in $streams; do
    BRAID_TCP_STREAMS=$k "$build/bin/braid" launch -n "$ranks" -- "$build/bin/braid" bench collective \
      --op allreduce --transport tcp --sizes "$sizes" --json "$@" | sed -n 's/^\[rank 0\] //p' | grep '^{' |
      sed "s/^/$k /" >>"$tmp/runs"
  done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$tmp/runs" "$reps" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, j = line.split(" ", 1)
    for r in json.loads(j)["results"]:
        runs.setdefault((int(r["bytes"]), int(k)), []).append(r)
ks = sorted({k for _, k in runs})
print(f"allreduce over tcp, median of {sys.argv[2]} alternating runs; busbw GB/s (time ms) per stream count")
print(f"{'bytes':>10} {'algorithm':>18}" + "".join(f" {f'{k} stream' + ('s' if k > 1 else ''):>28}" for k in ks))
for n in sorted({n for n, _ in runs}):
    cells = []
    for k in ks:
        rs = runs.get((n, k), [])
        bw = statistics.median(r["busbw_GBps"] for r in rs)
        ms = statistics.median(r["latency_us"] for r in rs) / 1e3
        spread = f"{min(r['busbw_GBps'] for r in rs):.2f}-{max(r['busbw_GBps'] for r in rs):.2f}"
        cells.append(f"{bw:6.3f} ({ms:7.2f}) [{spread}]")
    print(f"{n:>10} {runs[(n, ks[0])][0]['algorithm']:>18}" + "".join(f" {c:>28}" for c in cells))
PY
