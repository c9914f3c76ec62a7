#!/usr/bin/env bash
# The MLP's captured step cut over 2 and 3 processes (braid launch, shm) and
# run for 20 steps on Fashion-MNIST gives the loss curve of the same step run
# whole in one process (--ranks 1): equal to float tolerance (each process
# tunes its own kernels and thread count, so the last bits may differ).
# Usage: partition_launch.sh BRAID CONFIG
set -euo pipefail
braid=$1
config=$2
steps=20
losses() { grep -o "step [0-9]* loss [0-9.]*" | awk '{print $4}'; }
whole=$("$braid" graph "$config" --ranks 1 --run $steps --print-every 5 | losses)
[[ -n "$whole" ]] || { echo "no losses from the one-process run"; exit 1; }
for n in 2 3; do
  cut=$("$braid" launch -n $n -- "$braid" graph "$config" --run $steps --print-every 5 2>&1 | losses)
  paste <(echo "$whole") <(echo "$cut") | awk -v n=$n '
    { d = $1 - $2; if (d < 0) d = -d; if (d > 2e-3 || $2 == "") { print "ranks " n ": loss " $2 " vs " $1 " whole"; bad = 1 } }
    END { if (NR < 5) { print "ranks " n ": only " NR " losses"; bad = 1 } exit bad }'
  echo "ranks $n: $(echo "$cut" | tr '\n' ' ')= whole: $(echo "$whole" | tr '\n' ' ')"
done
