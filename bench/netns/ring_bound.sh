#!/usr/bin/env bash
# Ring all-reduce across 4 "hosts" (network namespaces, 1 Gbit/s tbf out of
# each) against the bandwidth bound 2(p-1)/p * n / B. B is given twice: the
# configured tbf rate, and what one plain TCP stream (stream.py) measures on
# the same links. Median of REPS runs; JSON to bench/results/netns_ring.json.
#
#   bench/netns/ring_bound.sh [BUILD_DIR] [REPS] [-- extra `bench collective` args]
# Env: RATE (1gbit), TBF ("burst 256kb latency 50ms"), SIZE (64M), OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
reps=${2:-5}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = -- ] && shift
extra=("$@")
rate=${RATE:-1gbit} size=${SIZE:-64M} out=${OUT:-$root/bench/results/netns_ring.json}
read -r -a tbf <<<"${TBF:-burst 256kb latency 50ms}"
p=4
BRAID=$build/bin/braid
. "$root/tests/comm/netns_lib.sh"
netns_ready || { echo "ring_bound: $NETNS_WHY" >&2; exit 1; }
netns_up $p "$rate" "${tbf[@]}"
tmp=$(mktemp -d)
trap 'netns_down; rm -rf "$tmp"' EXIT
cut -d' ' -f1-3 /proc/loadavg >"$tmp/load"  # the machine is shared: record how busy it was

# B as measured: host 0 -> host 1, one TCP stream of 256 MiB, REPS times.
for ((r = 0; r < reps; r++)); do
  ip netns exec "$(netns_host 1)" "$here/stream.py" recv 5201 $((256 << 20)) >>"$tmp/stream.jsonl" &
  ip netns exec "$(netns_host 0)" "$here/stream.py" send "$(netns_ip 1)" 5201 $((256 << 20))
  wait $!
done

for ((r = 0; r < reps; r++)); do
  netns_launch_all 29555 "$tmp" -- "$BRAID" bench collective --op allreduce --transport tcp \
    --algorithm ring --sizes "$size" --json "${extra[@]}"
  sed -n 's/^\[rank 0\] //p' "$tmp/h0.out" | grep '^{' >>"$tmp/ring.jsonl"
done

cut -d' ' -f1-3 /proc/loadavg >>"$tmp/load"
/usr/bin/python3 - "$tmp" "$out" "$rate" "${tbf[*]}" "$p" "$(git -C "$root" rev-parse --short HEAD)" "${extra[*]}" <<'PY'
import json, statistics, sys
tmp, out, rate, tbf, p, commit, extra = sys.argv[1:]
p = int(p)
units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
configured = next(float(rate[:-len(u)]) * m / 8 for u, m in units.items() if rate.endswith(u))  # bytes/s
stream = [json.loads(l)["bytes_per_s"] for l in open(f"{tmp}/stream.jsonl")]
runs = [json.loads(l) for l in open(f"{tmp}/ring.jsonl")]
n = runs[0]["results"][0]["bytes"]
times = [r["results"][0]["latency_us"] * 1e-6 for r in runs]
t = statistics.median(times)
measured = statistics.median(stream)
bound = lambda B: 2 * (p - 1) / p * n / B
res = {"ranks": p, "bytes": n, "tbf": f"rate {rate} {tbf}", "bench_args": extra, "commit": commit,
       "seconds_runs": times, "seconds": t, "stream_Bps_runs": stream,
       "B_configured_Bps": configured, "B_stream_Bps": measured,
       "bound_configured_s": bound(configured), "bound_stream_s": bound(measured),
       "ratio_configured": t / bound(configured), "ratio_stream": t / bound(measured),
       "loadavg_before_after": open(f"{tmp}/load").read().split("\n")[:2], "raw": runs}
json.dump(res, open(out, "w"), indent=1)
print(f"ring all-reduce of {n / 2**20:.0f} MiB over {p} namespaces, tbf rate {rate} {tbf}, median of {len(times)}")
print(f"  measured          {t:.3f} s   (runs: {', '.join(f'{x:.3f}' for x in times)}; min {min(times):.3f})")
print(f"  bound, B = {configured * 8 / 1e9:.3f} Gbit/s configured   {bound(configured):.3f} s   ratio {t / bound(configured):.3f}")
print(f"  bound, B = {measured * 8 / 1e9:.3f} Gbit/s one TCP stream {bound(measured):.3f} s   ratio {t / bound(measured):.3f}")
print(f"  -> {out}")
PY
