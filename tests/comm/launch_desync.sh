#!/bin/sh
# launch_desync.sh BRAID P2P_WORKER
# Three real processes over tcp: rank 1 broadcasts 8 bytes while ranks 0 and 2
# all-reduce 4 MiB. Every rank must report a desync naming both calls (not a
# size mismatch, not a timeout) well within the 20 s collective timeout; each
# leaves its history, and `braid inspect history` tells the same story.
set -u
braid=$1 worker=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
start=$(date +%s)
timeout -k 5 60 "$braid" launch -n 3 -- "$worker" desync --transport tcp --history-dir "$dir/history" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
echo "--- exit status $rc after $(( $(date +%s) - start )) s"
[ "$rc" = 3 ] || fail "expected exit status 3 (the ranks' 'desync reported'), got $rc"
want='desync at #2: rank 1 is at broadcast #2 (8 bytes, root 0) while ranks 0, 2 are at allreduce #2 (4 MiB f32 sum)'
grep -qF "rank 1 failed first" "$dir/out" || grep -qF "failed first" "$dir/out" || fail "no launcher summary"
grep -qF "$want" "$dir/out" || fail "the ranks did not name the desync"
for r in 0 1 2; do
  [ -f "$dir/history/rank-$r.json" ] || fail "rank $r left no history dump"
done
"$braid" inspect history "$dir" >"$dir/story" 2>&1 || { cat "$dir/story"; fail "braid inspect history failed"; }
cat "$dir/story"
grep -qF "story: $want" "$dir/story" || fail "inspect history did not tell the desync"
echo ok
