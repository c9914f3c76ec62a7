#!/usr/bin/env bash
# Data-parallel scaling across 4 "hosts" (network namespaces, 1 Gbit/s tbf out
# of each), with and without overlap of gradient all-reduce and backward.
# Per model: one process (the baseline), then `braid train` on 4 namespaces
# over tcp with parallel.overlap=true and =false, for each bucket size in
# BUCKETS (KiB; at the default 1024 both models' gradients fit one bucket,
# which leaves overlap nothing to overlap); batch 64 per rank, 1 thread per
# rank. Scaling = group samples/s / one-process samples/s. Median of REPS.
# JSON to bench/results/netns_dp_overlap.json.
#
#   bench/netns/dp_overlap.sh [BUILD_DIR] [REPS] [-- extra `braid train` --set args]
# Env: RATE (1gbit), MODELS ("mlp cnn"), BUCKETS ("1024 128"), STEPS_mlp (600),
# STEPS_cnn (200), OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
reps=${2:-3}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = -- ] && shift
extra=("$@")
rate=${RATE:-1gbit} out=${OUT:-$root/bench/results/netns_dp_overlap.json}
p=4
BRAID=$build/bin/braid
. "$root/tests/comm/netns_lib.sh"
netns_ready || { echo "dp_overlap: $NETNS_WHY" >&2; exit 1; }
netns_up $p "$rate"
tmp=$(mktemp -d)
trap 'netns_down; rm -rf "$tmp"' EXIT
cut -d' ' -f1-3 /proc/loadavg >"$tmp/load"  # the machine is shared: record how busy it was

# train_args MODEL: a short, quiet run whose rank 0 writes $tmp/summary.json.
train_args() {
  local steps_var=STEPS_$1
  local steps=${!steps_var:-$([ "$1" = cnn ] && echo 200 || echo 600)}
  echo train "$root/examples/configs/fashion_$1.toml" --set "train.max_steps=$steps" \
    --set train.threads=1 --set train.eval_every=0 --set "train.out_dir=$tmp/run" \
    --set train.progress=off --set train.checkpoint_every=100000000 --summary-json "$tmp/summary.json"
}
rate_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["global_samples_per_s"])' "$tmp/summary.json"; }

for model in ${MODELS:-mlp cnn}; do
  read -r -a args <<<"$(train_args "$model")"
  for ((r = 0; r < reps; r++)); do
    ip netns exec "$(netns_host 0)" "$BRAID" "${args[@]}" "${extra[@]}" >/dev/null
    echo "$model one - $(rate_of)" >>"$tmp/rates"
    for kb in ${BUCKETS:-1024 128}; do
      order="true false"
      ((r % 2 == 0)) || order="false true"  # alternate, so a drifting load favours neither
      for overlap in $order; do
        netns_launch_all 29555 "$tmp" -- "$BRAID" "${args[@]}" --set parallel.strategy=allreduce \
          --set parallel.transport=tcp --set "parallel.overlap=$overlap" --set "parallel.bucket_kb=$kb" "${extra[@]}"
        echo "$model overlap_$overlap $kb $(rate_of)" >>"$tmp/rates"
      done
    done
  done
done

cut -d' ' -f1-3 /proc/loadavg >>"$tmp/load"
/usr/bin/python3 - "$tmp" "$out" "$rate" "$p" "$(git -C "$root" rev-parse --short HEAD)" "${extra[*]}" <<'PY'
import collections, json, statistics, sys
tmp, out, rate, p, commit, extra = sys.argv[1:]
runs = collections.defaultdict(list)
for line in open(f"{tmp}/rates"):
    model, mode, kb, v = line.split()
    runs[(model, mode, kb)].append(float(v))
res = {"ranks": int(p), "tbf": f"rate {rate} burst 256kb latency 50ms", "transport": "tcp", "batch_per_rank": 64,
       "threads_per_rank": 1, "extra_args": extra, "commit": commit,
       "loadavg_before_after": open(f"{tmp}/load").read().split("\n")[:2], "models": {}}
print(f"4 namespaces, tbf {rate}, tcp, batch 64 per rank, 1 thread per rank; samples/s, median of runs")
print(f"{'model':5} {'bucket':>7} {'1 proc':>8} {'4 overlap':>10} {'scaling':>8} {'4 no-ovl':>10} {'scaling':>8} {'gain (paired)':>13}")
for model in dict.fromkeys(k[0] for k in runs):
    one = statistics.median(runs[(model, "one", "-")])
    res["models"][model] = {"one_process": one, "one_process_runs": runs[(model, "one", "-")], "buckets": {}}
    for kb in dict.fromkeys(k[2] for k in runs if k[0] == model and k[2] != "-"):
        on, off = (statistics.median(runs[(model, m, kb)]) for m in ("overlap_true", "overlap_false"))
        # Gain per rep, on and off run back to back: less exposed to the load drifting over minutes.
        gain = statistics.median(a / b for a, b in zip(runs[(model, "overlap_true", kb)], runs[(model, "overlap_false", kb)]))
        res["models"][model]["buckets"][kb] = {
            "overlap": on, "no_overlap": off, "scaling_overlap": on / one, "scaling_no_overlap": off / one,
            "overlap_gain_paired": gain, "runs": {m: runs[(model, m, kb)] for m in ("overlap_true", "overlap_false")}}
        print(f"{model:5} {kb + ' KiB':>7} {one:8.0f} {on:10.0f} {on / one:7.2f}x {off:10.0f} {off / one:7.2f}x {gain:12.2f}x")
json.dump(res, open(out, "w"), indent=1)
print(f"  -> {out}")
PY
