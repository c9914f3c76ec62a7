#!/usr/bin/env bash
# Point-to-point ping-pong, 2 ranks on this host, in one run: Open MPI (its
# default shared-memory path) vs braid's shm and tcp transports, same sizes,
# same iteration counts. Prints one-way latency (us) and bandwidth (GB/s) per
# size, and braid/MPI bandwidth ratios.
#
#   bench/p2p_vs_mpi.sh [BUILD_DIR] [ITERS_SCALE]
#
# BUILD_DIR holds bin/braid and tests/comm/braid_p2p_worker (default: build).
# Both sides run with glibc's default malloc settings; set GLIBC_TUNABLES in
# the environment to change that for both.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
scale=${2:-1}
braid=$build/bin/braid
worker=$build/tests/comm/braid_p2p_worker
[[ -x $braid && -x $worker ]] || { echo "build braid and braid_p2p_worker in $build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_pingpong" "$root/bench/p2p_vs_mpi_peer.c"

mpirun --oversubscribe --allow-run-as-root -n 2 "$tmp/mpi_pingpong" "$scale" > "$tmp/mpi.txt"
"$braid" launch -n 2 -- "$worker" bench --transport shm --iters-scale "$scale" | sed 's/^\[rank 0\] //' > "$tmp/shm.txt"
"$braid" launch -n 2 -- "$worker" bench --transport tcp --iters-scale "$scale" | sed 's/^\[rank 0\] //' > "$tmp/tcp.txt"

echo "2 ranks, ping-pong, one-way time; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-10s | %10s %8s | %10s %8s %6s | %10s %8s %6s\n' bytes "mpi us" "GB/s" "shm us" "GB/s" "x mpi" "tcp us" "GB/s" "x mpi"
paste <(tail -n +2 "$tmp/mpi.txt") <(tail -n +2 "$tmp/shm.txt") <(tail -n +2 "$tmp/tcp.txt") |
  awk '{ printf "%-10s | %10.2f %8.3f | %10.2f %8.3f %6.2f | %10.2f %8.3f %6.2f\n",
         $1, $2, $3, $5, $6, ($3 > 0 ? $6 / $3 : 0), $8, $9, ($3 > 0 ? $9 / $3 : 0) }'
