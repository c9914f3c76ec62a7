#!/usr/bin/env bash
# The ranks `braid launch` starts inherit no socket of the launcher's: the
# store's listening socket and its accepted connections are close-on-exec.
# Before, every rank held the store's listening socket.
# Usage: inherited_fds.sh path/to/braid
set -u
out=$(timeout -k 2 30 "$1" launch -n 2 -- sh -c 'echo "sockets=$(ls -l /proc/$$/fd | grep -c socket:)"' 2>&1)
code=$?
echo "$out"
[ "$code" = 0 ] || { echo "FAIL: braid launch exited $code"; exit 1; }
for r in 0 1; do
  grep -qx "\[rank $r\] sockets=0" <<<"$out" || { echo "FAIL: rank $r inherited sockets from the launcher"; exit 1; }
done
echo "ok: no rank inherited a socket"
