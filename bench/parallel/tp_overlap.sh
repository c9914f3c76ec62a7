#!/usr/bin/env bash
# Tensor parallelism's collectives overlapped with their GEMMs (parallel.tp_overlap)
# against the blocking collectives, across 2 "hosts" (network namespaces joined
# by a bridge, each host's egress shaped to RATE with tc tbf; tests/comm/netns_lib.sh),
# one rank per host, tcp between them, 1 thread per rank: a gpt (MODEL_ARGS,
# default 4 layers of width 256, 4 heads, 256 tokens, batch 4) under
# parallel.tensor = 2 with sequence parallelism (SP=false: plain TP). The modes take
# turns over REPS rounds (so a drifting load favours neither); each run's step
# time is the median of its steps after the first two (metrics.jsonl). A third
# run per round, one process with the whole model, gives the compute: a tensor
# rank does half of it (every GEMM and attention head split in two, and with
# sequence parallelism the norms and residuals too); then
#
#   communication  = blocking(tcp) - one process / 2     (what the blocking step adds to its compute)
#   hidden share   = (blocking(tcp) - overlap(tcp)) / communication
#   speed-up       = blocking(tcp) / overlap(tcp)          (step throughput)
#
# JSON to bench/results/tp_overlap.json (OUT), with the load average before and after.
#
#   bench/parallel/tp_overlap.sh [BUILD_DIR] [REPS]
# Env: RATE (1gbit), SP (true), STEPS (10), OUT, MODEL_ARGS.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
reps=${2:-3}
rate=${RATE:-1gbit} sp=${SP:-true} steps=${STEPS:-10}
out_json=${OUT:-$root/bench/results/tp_overlap.json}
BRAID=$build/bin/braid
braid=$BRAID
. "$root/tests/comm/netns_lib.sh"
netns_ready || { echo "tp_overlap: $NETNS_WHY" >&2; exit 1; }
netns_up 2 "$rate"
out=$(mktemp -d /tmp/braid-tp-overlap.XXXXXX)
trap 'netns_down; rm -rf "$out"' EXIT
. "$root/tests/models/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 4
cut -d' ' -f1-3 /proc/loadavg >"$out/load"
read -r -a model <<<"${MODEL_ARGS:-model.d_model=256 model.n_heads=4 model.n_layers=4 model.context=256 train.batch_size=4}"
sets=()
for kv in "${model[@]}" "train.max_steps=$steps" train.eval_every=0 train.log_every=1 \
  train.threads=1 train.progress=off train.checkpoint_every=100000000 train.deterministic=false; do
  sets+=(--set "$kv")
done
tp=(--set parallel.tensor=2 --set "parallel.sequence_parallel=$sp" --set parallel.timeout_s=120)
# step_ms DIR: the median step time of a run after its first two steps.
step_ms() {
  /usr/bin/python3 -c 'import json,statistics,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if "step_ms" in l]
print(statistics.median(r["step_ms"] for r in rows[2:]))' "$1/metrics.jsonl"
}
port=29711
for ((r = 0; r < reps; r++)); do
  order="true false"
  ((r % 2 == 0)) || order="false true"
  for overlap in $order; do
    rm -rf "$out/run"
    netns_launch_all "$port" "$out" -- "$BRAID" train "$out/tiny.toml" "${sets[@]}" "${tp[@]}" --set parallel.transport=tcp \
      --set "parallel.tp_overlap=$overlap" --set train.out_dir="$out/run" ||
      { tail -n 20 "$out"/h*.out; echo "FAIL: overlap $overlap" >&2; exit 1; }
    echo "tcp_overlap_$overlap $(step_ms "$out/run")" >>"$out/times"
    port=$((port + 1))
  done
  rm -rf "$out/run"
  "$BRAID" train "$out/tiny.toml" "${sets[@]}" --set parallel.strategy=none --set train.out_dir="$out/run" \
    >"$out/one.log" 2>&1 || { tail -n 20 "$out/one.log"; echo "FAIL: one process" >&2; exit 1; }
  echo "one_process $(step_ms "$out/run")" >>"$out/times"
done
cut -d' ' -f1-3 /proc/loadavg >>"$out/load"
mkdir -p "$(dirname "$out_json")"
/usr/bin/python3 - "$out" "$out_json" "$rate" "$sp" "${model[*]}" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import collections, json, statistics, sys
tmp, out, rate, sp, model, commit = sys.argv[1:]
runs = collections.defaultdict(list)
for line in open(f"{tmp}/times"):
    mode, v = line.split()
    runs[mode].append(float(v))
on, off, one = (statistics.median(runs[m]) for m in ("tcp_overlap_true", "tcp_overlap_false", "one_process"))
comm = off - one / 2
res = {"tbf": f"rate {rate} burst 256kb latency 50ms", "ranks": 2, "threads_per_rank": 1, "sequence_parallel": sp == "true",
       "model": model, "commit": commit, "loadavg_before_after": open(f"{tmp}/load").read().split("\n")[:2],
       "step_ms": {"tcp_overlap": on, "tcp_blocking": off, "one_process": one}, "runs_ms": dict(runs),
       "speedup": off / on, "communication_ms": comm, "hidden_share": (off - on) / comm if comm > 0 else None}
json.dump(res, open(out, "w"), indent=1)
print(f"TP 2 (sequence parallel {sp}) over tcp, tbf {rate}, 1 thread a rank; {model}")
print(f"median step: overlap {on:.0f} ms, blocking {off:.0f} ms, one process {one:.0f} ms (runs {dict(runs)})")
print(f"throughput overlap / blocking: {off / on:.2f}x; communication {comm:.0f} ms a step, "
      f"hidden {100 * res['hidden_share']:.0f}%" if comm > 0 else "communication not measurable")
print(f"load average before / after: {res['loadavg_before_after']}")
PY
