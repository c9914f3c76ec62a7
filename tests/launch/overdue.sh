#!/usr/bin/env bash
# Once a job's outcome is decided, `braid launch` gives every rank still
# running a deadline, then names and stops it (docs/reliability.md, "The
# launcher"). Before, a stopped parameter-server worker kept the launcher
# waiting for ever after the server had finished. The ranks are fake (sh).
# Usage: overdue.sh path/to/braid
set -u
braid=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=; err=
fail() { echo "FAIL: $*"; echo "--- stdout ---"; echo "$out"; echo "--- stderr ---"; echo "$err"; exit 1; }
run() {  # run ARGS...: sets out, err, code, elapsed (ms); a 30 s deadline makes a hang a failure
  local start=$(date +%s%N)
  timeout -k 2 30 "$braid" launch "$@" >"$dir/out" 2>"$dir/err"
  code=$?
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  out=$(<"$dir/out"); err=$(<"$dir/err")
  [ "$code" != 124 ] && [ "$code" != 137 ] || fail "braid launch $* was still running after 30 s (a hang)"
}

# (a) ps: worker 1 (rank 2) stops itself; worker 0 finishes, then the server.
# The stopped worker gets --stop-grace (1 s), then is named and stopped; the
# job succeeds (worker 0 and the server did).
run --servers 1 --workers 2 --stop-grace 1 \
  --server-program /bin/sh --server-arg -c --server-arg 'sleep 0.5; echo "server done"' \
  -- sh -c 'if [ "$RANK" = 2 ]; then kill -STOP $$; fi; echo "worker $RANK done"'
[ "$code" = 0 ] || fail "(a) exit code $code, expected 0 (server and worker 0 succeeded)"
[ "$elapsed" -lt 6000 ] || fail "(a) took ${elapsed} ms"
grep -q "worker rank 2 still running .* s after every server on this node ended (it is stopped: SIGSTOP or a debugger); stopping it" <<<"$err" ||
  fail "(a) the stopped worker was not named"
grep -q "training finished without workers \[2\]" <<<"$err" || fail "(a) no final summary naming worker rank 2"
echo "ok (a): a stopped ps worker was named and stopped ${elapsed} ms after the start"

# (b) A worker still computing (not stopped) gets --finish-grace, not --stop-grace.
run --servers 1 --workers 2 --stop-grace 0.3 --finish-grace 2 \
  --server-program /bin/true \
  -- sh -c 'if [ "$RANK" = 2 ]; then sleep 1; fi; echo "worker $RANK done"'
[ "$code" = 0 ] || fail "(b) exit code $code, expected 0"
grep -qx "\[rank 2\] worker 2 done" <<<"$out" || fail "(b) the busy worker was stopped before --finish-grace"
grep -q "stopping it" <<<"$err" && fail "(b) a rank was stopped though it ended within --finish-grace"
echo "ok (b): a busy worker finished within --finish-grace"

# (c) Plain job: rank 1 hangs (not stopped) after the others exited 0: named
# and stopped after --finish-grace, and the job fails.
run -n 3 --finish-grace 1 --stop-grace 1 -- sh -c 'if [ "$RANK" = 1 ]; then exec sleep 60; fi'
[ "$code" = 1 ] || fail "(c) exit code $code, expected 1"
[ "$elapsed" -lt 6000 ] || fail "(c) took ${elapsed} ms"
grep -q "braid launch: rank 1 still running 1.. s after every other rank exited 0; stopping it" <<<"$err" ||
  fail "(c) the hung rank was not named"
grep -q "rank 1 failed first: still running" <<<"$err" || fail "(c) the summary does not name rank 1"
echo "ok (c): a hung rank of a finished plain job was named and stopped, exit 1, ${elapsed} ms"

# (d) Plain job, rank 0 stopped: --stop-grace, not the long --finish-grace.
run -n 2 --finish-grace 60 --stop-grace 1 -- sh -c 'if [ "$RANK" = 0 ]; then kill -STOP $$; fi'
[ "$code" = 1 ] || fail "(d) exit code $code, expected 1"
[ "$elapsed" -lt 6000 ] || fail "(d) took ${elapsed} ms: the stopped rank waited for --finish-grace"
grep -q "rank 0 still running .* (it is stopped: SIGSTOP or a debugger); stopping it" <<<"$err" ||
  fail "(d) the stopped rank was not named"
echo "ok (d): a stopped rank of a finished plain job was stopped after --stop-grace, ${elapsed} ms"
