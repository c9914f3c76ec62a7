#!/usr/bin/env bash
# Times the README's demo as a new user meets it: a fresh clone of this
# repository's HEAD, no build folder, no compiler cache (CCACHE_DISABLE), the
# setup packages already installed. Prints the seconds to the build's end, to
# the first training progress line and to the demo's end.
#
#   bench/build/demo_time.sh [scripts/demo arguments...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/braid"
cd "$tmp/braid"
SECONDS=0
built="" first=""
while IFS= read -r line; do
  t=$SECONDS
  printf '[%4d s] %s\n' "$t" "$line"
  [[ -z "$built" && "$line" == "build: done"* ]] && built=$t
  # The first line the trainer prints about a step (progress lines say "step N/M" or "epoch").
  [[ -z "$first" && "$line" =~ (^|[^a-z])(step|epoch)[[:space:]]+[0-9] ]] && first=$t
done < <(CCACHE_DISABLE=1 scripts/demo "$@" 2>&1)
printf 'demo_time: build done at %s s, first progress line at %s s, whole demo %s s (nproc %s, commit %s)\n' \
  "${built:-?}" "${first:-?}" "$SECONDS" "$(nproc)" "$(git -C "$repo" rev-parse --short HEAD)"
