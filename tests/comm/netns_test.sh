#!/usr/bin/env bash
# Multi-host suite on one machine: N network namespaces ("hosts") joined by
# veth pairs to a bridge, each host's link shaped to 1 Gbit/s with tc tbf
# (netns_lib.sh). One `braid launch` per namespace (--nnodes N) runs the tcp
# conformance checks, then ranks 0 and 1 ping-pong across the shaped link.
# Needs root, iproute2 and tc; exits 77 (ctest: skipped) otherwise.
#
#   netns_test.sh path/to/braid path/to/braid_p2p_worker [N]
set -u
BRAID=$1 worker=$2 n=${3:-3}
. "$(dirname "$0")/netns_lib.sh"
netns_ready || { echo "SKIP: $NETNS_WHY"; exit 77; }
# 1 Gbit/s out of each host (a 1 Gbit/s tbf measured 0.96 Gbit/s here).
netns_up "$n" 1gbit || { echo "FAIL: namespace setup"; exit 1; }

netns_launch_all 29555 "" -- "$worker" check --transport tcp ||
  { echo "FAIL: tcp checks across $n namespaces"; exit 1; }
echo "ok: tcp point-to-point checks across $n namespaces"
netns_launch_all 29555 "" -- "$worker" bench --transport tcp --iters-scale 0.05 ||
  { echo "FAIL: tcp bench across namespaces"; exit 1; }
