#!/bin/sh
# expect.sh SECONDS WANT PATTERN COMMAND...
# Runs COMMAND under a deadline (SIGTERM at SECONDS, SIGKILL 5 s later) and
# passes when its exit status is WANT ("0", or "fail": non-zero but not the
# deadline's 124/137) and its output matches the extended regex PATTERN. A
# command still running at the deadline always fails: that is a hang.
set -u
seconds=$1 want=$2 pattern=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout -k 5 "$seconds" "$@" >"$out" 2>&1
rc=$?
cat "$out"
echo "--- exit status $rc after $(( $(date +%s) - start )) s"
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "FAILED: still running after ${seconds} s (a hang)"
  exit 1
fi
if [ "$want" = fail ]; then
  [ "$rc" != 0 ] || { echo "FAILED: exited 0, expected a failure"; exit 1; }
else
  [ "$rc" = "$want" ] || { echo "FAILED: exit status $rc, expected $want"; exit 1; }
fi
grep -Eq -- "$pattern" "$out" || { echo "FAILED: output does not match: $pattern"; exit 1; }
echo "ok"
