#!/usr/bin/env bash
# Multi-host suite on one machine: N network namespaces ("hosts") joined by
# veth pairs to a bridge, each host's link shaped to 1 Gbit/s with tc tbf.
# One `braid launch` per namespace (--nnodes N) runs the tcp conformance
# checks, then ranks 0 and 1 ping-pong across the shaped link.
# Needs root, iproute2 and tc; exits 77 (ctest: skipped) otherwise.
#
#   netns_test.sh path/to/braid path/to/braid_p2p_worker [N]
set -u
braid=$1 worker=$2 n=${3:-3}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs ip and tc"
tag=bn$$
ip netns add "${tag}br" 2>/dev/null || skip "cannot create network namespaces here"
cleanup() {
  for i in $(seq 0 $((n - 1))); do ip netns del "${tag}h$i" 2>/dev/null; done
  ip netns del "${tag}br" 2>/dev/null
}
trap cleanup EXIT
set -e
ip -n "${tag}br" link add br0 type bridge
ip -n "${tag}br" link set br0 up
for i in $(seq 0 $((n - 1))); do
  ns=${tag}h$i
  ip netns add "$ns"
  ip link add "v$i$tag" type veth peer name eth0 netns "$ns"
  ip link set "v$i$tag" netns "${tag}br"
  ip -n "${tag}br" link set "v$i$tag" master br0 up
  ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # 1 Gbit/s out of each host (a 1 Gbit/s tbf measured 0.96 Gbit/s here).
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 1gbit burst 256kb latency 50ms
done
set +e

run_all() {  # mode args...: one launcher per host, node 0 hosts the store
  local pids=() rc=0
  for i in $(seq 0 $((n - 1))); do
    ip netns exec "${tag}h$i" env BRAID_TOKEN=netns-test BRAID_HOST="10.77.0.$((i + 1))" \
      "$braid" launch -n 1 --nnodes "$n" --node-rank "$i" --master-addr 10.77.0.1 \
      --master-port 29555 -- "$worker" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

run_all check --transport tcp || { echo "FAIL: tcp checks across $n namespaces"; exit 1; }
echo "ok: tcp point-to-point checks across $n namespaces"
run_all bench --transport tcp --iters-scale 0.05 || { echo "FAIL: tcp bench across namespaces"; exit 1; }
