#!/usr/bin/env bash
# `braid launch` when a rank fails: the others are stopped at once, the summary
# names the rank, how it failed and its last lines, and the group is restarted
# --max-restarts times; a stopped (SIGSTOP) rank goes with them. Usage:
# launch_failure.sh path/to/braid
set -u
braid=$1
start=$(date +%s)
err=$("$braid" launch -n 3 --max-restarts 1 -- sh -c \
  'echo "attempt $BRAID_RESTART"; if [ "$RANK" = 1 ]; then echo boom >&2; exit 3; fi; sleep 60' 2>&1 >/dev/null)
code=$?
elapsed=$(( $(date +%s) - start ))
fail() { echo "FAIL: $*"; echo "--- stderr ---"; echo "$err"; exit 1; }
[ "$code" = 3 ] || fail "exit code $code, expected rank 1's 3"
[ "$elapsed" -lt 15 ] || fail "took ${elapsed}s: the sleeping ranks were not stopped"
grep -q "rank 1 failed first: exited with code 3" <<<"$err" || fail "summary does not name rank 1"
grep -q "stopped ranks \[0, 2\]" <<<"$err" || fail "summary does not list the stopped ranks"
grep -q "| boom" <<<"$err" || fail "summary lacks rank 1's last lines"
[ "$(grep -c 'restarting the group' <<<"$err")" = 1 ] || fail "expected exactly one restart"
echo "ok: rank 1 reported, others stopped, restarted once, ${elapsed}s"

# A stopped rank (SIGSTOP) is stopped with the rest at once, not after
# --stop-grace: SIGTERM stays pending in a stopped process until SIGCONT.
start=$(date +%s)
err=$("$braid" launch -n 2 --stop-grace 30 -- sh -c \
  'if [ "$RANK" = 1 ]; then kill -STOP $$; fi; sleep 1; exit 3' 2>&1 >/dev/null)
code=$?
elapsed=$(( $(date +%s) - start ))
[ "$code" = 3 ] || fail "exit code $code, expected rank 0's 3"
[ "$elapsed" -lt 15 ] || fail "took ${elapsed}s: the stopped rank waited for the SIGKILL after --stop-grace"
grep -q "stopped ranks \[1\]" <<<"$err" || fail "summary does not list the stopped rank"
echo "ok: the stopped rank was ended with the others, ${elapsed}s"
