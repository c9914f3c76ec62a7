# Sourced, not run: N network namespaces ("hosts") on one machine, each
# joined by a veth pair to a bridge in its own namespace, each host's egress
# shaped with tc tbf (this kernel has no netem). Shared by
# tests/comm/netns_test.sh and the benches in bench/netns/.
#
#   . tests/comm/netns_lib.sh
#   netns_ready || exit 77                  # why not, in $NETNS_WHY
#   netns_up 4 1gbit                        # removed again on EXIT
#   netns_launch_all 29555 "$outdir" -- braid bench collective ...
#
# Host i is namespace ${NETNS_TAG}h$i with address 10.77.0.(i+1) on eth0.

NETNS_TAG=bn$$
NETNS_N=0
NETNS_WHY=

netns_ready() {  # 0 if namespaces can be made here; else sets NETNS_WHY
  if [ "$(id -u)" != 0 ]; then NETNS_WHY="needs root"; return 1; fi
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then NETNS_WHY="needs ip and tc"; return 1; fi
  if ! ip netns add "${NETNS_TAG}probe" 2>/dev/null; then
    NETNS_WHY="cannot create network namespaces here"; return 1
  fi
  ip netns del "${NETNS_TAG}probe"
}

netns_ip() { echo "10.77.0.$(($1 + 1))"; }
netns_host() { echo "${NETNS_TAG}h$1"; }

netns_down() {
  local i
  for ((i = 0; i < NETNS_N; i++)); do ip netns del "$(netns_host "$i")" 2>/dev/null; done
  ip netns del "${NETNS_TAG}br" 2>/dev/null
  NETNS_N=0
}

# netns_up N RATE [TBF_ARGS...]: N hosts, RATE (tc units, e.g. 1gbit) out of
# each. The default burst/latency are what the 1 Gbit/s figures in docs/ were
# measured with; a bench may pass its own.
netns_up() {
  local n=$1 rate=$2 i ns
  shift 2
  local tbf=("$@")
  [ ${#tbf[@]} -gt 0 ] || tbf=(burst 256kb latency 50ms)
  trap netns_down EXIT
  ip netns add "${NETNS_TAG}br" || return 1
  NETNS_N=$n
  ip -n "${NETNS_TAG}br" link add br0 type bridge || return 1
  ip -n "${NETNS_TAG}br" link set br0 up || return 1
  for ((i = 0; i < n; i++)); do
    ns=$(netns_host "$i")
    ip netns add "$ns" &&
      ip link add "v$i$NETNS_TAG" type veth peer name eth0 netns "$ns" &&
      ip link set "v$i$NETNS_TAG" netns "${NETNS_TAG}br" &&
      ip -n "${NETNS_TAG}br" link set "v$i$NETNS_TAG" master br0 up &&
      ip -n "$ns" addr add "$(netns_ip "$i")/24" dev eth0 &&
      ip -n "$ns" link set eth0 up &&
      ip -n "$ns" link set lo up &&
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" "${tbf[@]}" || return 1
  done
}

# netns_launch_all PORT OUTDIR -- PROGRAM ARGS...: one `braid launch -n 1` per
# host (node 0 serves the store), $BRAID stdout of host i to OUTDIR/h$i.out
# (OUTDIR empty: inherit). Fails if any host fails.
netns_launch_all() {
  local port=$1 out=$2 i rc=0 pids=()
  shift 3
  for ((i = 0; i < NETNS_N; i++)); do
    local cmd=(ip netns exec "$(netns_host "$i")" env BRAID_TOKEN=netns BRAID_HOST="$(netns_ip "$i")"
      "$BRAID" launch -n 1 --nnodes "$NETNS_N" --node-rank "$i" --master-addr "$(netns_ip 0)"
      --master-port "$port" -- "$@")
    if [ -n "$out" ]; then "${cmd[@]}" >"$out/h$i.out" & else "${cmd[@]}" & fi
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  return $rc
}
