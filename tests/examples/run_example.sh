#!/usr/bin/env bash
# Runs an example (directly or through `braid launch`) and checks that it
# finished its work: exit status 0 and RANKS lines
#   ... trained STEPS steps: final loss L ...
# (one per rank or worker), each L a finite number below MAX_LOSS.
# usage: run_example.sh RANKS STEPS MAX_LOSS COMMAND [ARGS...]  (@TMP@ in ARGS: a fresh folder)
set -uo pipefail
ranks=$1 steps=$2 max_loss=$3
shift 3
# @TMP@ in an argument is a fresh folder: an example that checkpoints would
# otherwise resume its previous run's finished checkpoints (train.resume = auto).
tmp=$(mktemp -d /tmp/braid-example.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
set -- "${@//@TMP@/$tmp}"
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[[ $rc == 0 ]] || { echo "FAIL: '$*' exited with $rc"; exit 1; }
# A NaN or inf loss does not match [0-9.]+, so such a line does not count.
losses=$(grep -oE "trained $steps steps: final loss [0-9.]+" <<<"$out" | grep -oE '[0-9.]+$')
found=$(grep -c . <<<"$losses")
[[ $found == "$ranks" ]] || { echo "FAIL: $found of $ranks processes reported $steps steps with a finite loss"; exit 1; }
for l in $losses; do
  awk -v l="$l" -v m="$max_loss" 'BEGIN { exit !(l < m) }' || { echo "FAIL: final loss $l >= $max_loss"; exit 1; }
done
echo "PASS: $ranks x $steps steps, final losses" $losses
