#!/usr/bin/env bash
# Context parallelism across hosts: 2 network namespaces joined by a bridge,
# each link shaped to 1 Gbit/s (tests/comm/netns_lib.sh), one rank per
# "host", tcp between them: the tiny gpt of gpt_context.sh with its sequences
# split over the two hosts (ring, then Ulysses) must give the held-out loss of
# one process to 4 decimals. Needs root, iproute2 and tc; exits 77 (ctest:
# skipped) otherwise.
#
#   gpt_context_netns.sh path/to/braid
set -u
BRAID=$1
. "$(dirname "$0")/../comm/netns_lib.sh"
netns_ready || { echo "SKIP: $NETNS_WHY"; exit 77; }
netns_up 2 1gbit || { echo "FAIL: namespace setup"; exit 1; }
out=$(mktemp -d /tmp/braid-gpt-context-netns.XXXXXX)
trap 'netns_down; rm -rf "$out"' EXIT
braid=$BRAID
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 2
one=$(loss one 1 parallel.strategy=none) || exit 1
port=29641
for mode in ring ulysses; do
  mkdir -p "$out/$mode"
  netns_launch_all "$port" "$out/$mode" -- "$BRAID" train "$out/tiny.toml" --set parallel.context=2 \
    --set parallel.context_mode=$mode --set parallel.timeout_s=60 --set train.out_dir="$out/$mode/run" ||
    { tail -n 20 "$out/$mode"/h*.out; echo "FAIL: $mode across 2 namespaces"; exit 1; }
  got=$(final_loss "$out/$mode/h0.out")
  [ "$got" = "$one" ] || { cat "$out/$mode/h0.out"; echo "FAIL: $mode: held-out loss $got, one process $one"; exit 1; }
  echo "ok: context 2 ($mode) across 2 namespaces over a 1 Gbit/s link: $got (one process $one)"
  port=$((port + 1))
done
