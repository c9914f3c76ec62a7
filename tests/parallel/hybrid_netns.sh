#!/usr/bin/env bash
# Hybrid parallelism across hosts: 4 network namespaces joined by a bridge,
# each link shaped to 1 Gbit/s (tests/comm/netns_lib.sh), one rank per
# "host", tcp between them. A small char transformer trains a few steps as
# data 2 x pipeline 2 and as tensor 2 x pipeline 2; each run must end on
# every host with a finite loss. Needs root, iproute2 and tc; exits 77
# (ctest: skipped) otherwise.
#
#   hybrid_netns.sh path/to/braid path/to/char_transformer.toml
set -u
BRAID=$1 config=$2
. "$(dirname "$0")/../comm/netns_lib.sh"
netns_ready || { echo "SKIP: $NETNS_WHY"; exit 77; }
netns_up 4 1gbit || { echo "FAIL: namespace setup"; exit 1; }
out=$(mktemp -d /tmp/braid-hybrid-netns.XXXXXX)
trap 'netns_down; rm -rf "$out"' EXIT
small=(--set model.d_model=32 --set model.n_heads=4 --set model.n_layers=2 --set model.dropout=0
       --set train.batch_size=8 --set train.max_steps=10 --set train.eval_every=0 --set train.log_every=5
       --set train.threads=1 --set train.progress=lines --set parallel.timeout_s=60)
port=29611
for mesh in "parallel.data=2 parallel.pipeline=2" "parallel.tensor=2 parallel.pipeline=2"; do
  sets=()
  for kv in $mesh; do sets+=(--set "$kv"); done
  mkdir -p "$out/$port"
  # (ctest's timeout bounds the whole script; every wait inside braid has its own.)
  netns_launch_all "$port" "$out/$port" -- "$BRAID" train "$config" "${small[@]}" "${sets[@]}" \
    --set train.out_dir="$out/$port/run" ||
    { tail -n 20 "$out/$port"/h*.out; echo "FAIL: $mesh across 4 namespaces"; exit 1; }
  grep -q "plan: " "$out/$port/h0.out" || { cat "$out/$port/h0.out"; echo "FAIL: $mesh printed no plan"; exit 1; }
  grep -Eq "final train loss [0-9]+\.[0-9]+" "$out/$port/h0.out" || { cat "$out/$port/h0.out"; echo "FAIL: $mesh"; exit 1; }
  echo "ok: $mesh across 4 namespaces over tcp: $(grep -o 'final train loss [0-9.]*' "$out/$port/h0.out")"
  port=$((port + 1))
done
