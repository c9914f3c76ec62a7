#!/usr/bin/env bash
# Sequence parallelism across hosts: 2 network namespaces joined by a bridge,
# each link shaped to 1 Gbit/s (tests/comm/netns_lib.sh), one rank per
# "host", tcp between them: the tiny gpt of gpt_sp_launch.sh under
# parallel.tensor = 2 with parallel.sequence_parallel = true, the collectives
# overlapped and then blocking, must give the held-out loss of one process to
# 4 decimals. Needs root, iproute2 and tc; exits 77 (ctest: skipped) otherwise.
#
#   gpt_sp_netns.sh path/to/braid
set -u
BRAID=$1
. "$(dirname "$0")/../comm/netns_lib.sh"
netns_ready || { echo "SKIP: $NETNS_WHY"; exit 77; }
netns_up 2 1gbit || { echo "FAIL: namespace setup"; exit 1; }
out=$(mktemp -d /tmp/braid-gpt-sp-netns.XXXXXX)
trap 'netns_down; rm -rf "$out"' EXIT
braid=$BRAID
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 2
one=$(loss one 1 parallel.strategy=none) || exit 1
port=29671
for overlap in true false; do
  mkdir -p "$out/$overlap"
  netns_launch_all "$port" "$out/$overlap" -- "$BRAID" train "$out/tiny.toml" --set parallel.tensor=2 \
    --set parallel.sequence_parallel=true --set parallel.tp_overlap=$overlap --set parallel.timeout_s=60 \
    --set train.out_dir="$out/$overlap/run" ||
    { tail -n 20 "$out/$overlap"/h*.out; echo "FAIL: overlap $overlap across 2 namespaces"; exit 1; }
  got=$(final_loss "$out/$overlap/h0.out")
  [ "$got" = "$one" ] || { cat "$out/$overlap/h0.out"; echo "FAIL: overlap $overlap: held-out loss $got, one process $one"; exit 1; }
  echo "ok: TP 2 with sequence parallelism (overlap $overlap) across 2 namespaces over a 1 Gbit/s link: $got (one process $one)"
  port=$((port + 1))
done
