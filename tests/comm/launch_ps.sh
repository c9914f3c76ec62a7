#!/usr/bin/env bash
# `braid launch --servers S --workers W`: roles and environment per rank; a
# failed worker is reported while the others go on (exit 0 when the servers
# and worker 0 succeed); a failed server stops everyone and sets the exit code.
# The servers are fake: `/bin/sh -c SCRIPT` through --server-program/--server-arg.
# Usage: launch_ps.sh path/to/braid
set -u
braid=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=; err=
fail() { echo "FAIL: $*"; echo "--- stdout ---"; echo "$out"; echo "--- stderr ---"; echo "$err"; exit 1; }
run() {  # run ARGS...: sets out, err, code, elapsed
  local start=$(date +%s)
  "$braid" launch "$@" >"$dir/out" 2>"$dir/err"
  code=$?
  elapsed=$(( $(date +%s) - start ))
  out=$(<"$dir/out"); err=$(<"$dir/err")
}
show='echo "env RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE ROLE=$BRAID_ROLE SERVERS=$BRAID_PS_SERVERS"'

# (a) S=2, W=3. The servers wait for worker 0's file, then exit by themselves.
run --servers 2 --workers 3 --stop-grace 5 \
  --server-program /bin/sh --server-arg -c \
  --server-arg "while [ ! -e '$dir/a.done' ]; do sleep 0.1; done; $show" \
  -- sh -c "$show; if [ \"\$RANK\" = 2 ]; then touch '$dir/a.done'; fi"
[ "$code" = 0 ] || fail "(a) exit code $code, expected 0"
for r in 0 1 2 3 4; do
  role=worker; [ $r -lt 2 ] && role=server
  grep -qx "\[rank $r\] env RANK=$r WORLD_SIZE=5 LOCAL_WORLD_SIZE=5 ROLE=$role SERVERS=2" <<<"$out" ||
    fail "(a) rank $r did not print its environment as a $role"
done
grep -q "still running" <<<"$err" && fail "(a) the servers had to be stopped, though they exited by themselves"
echo "ok (a): 2 servers and 3 workers with the right RANK, WORLD_SIZE, BRAID_ROLE, BRAID_PS_SERVERS"

# (b) Workers 1 and 2 (ranks 2 and 3) fail; worker 0 (rank 1) goes on and
# succeeds. The server never exits by itself: it is stopped --stop-grace after
# the last worker, and a stop it asked for is no failure. No restart either.
run --servers 1 --workers 3 --stop-grace 1 --max-restarts 1 \
  --server-program /bin/sh --server-arg -c --server-arg 'trap "exit 0" TERM; while :; do sleep 0.1; done' \
  -- sh -c 'case $RANK in
      1) sleep 1; echo "worker 0 done";;
      2) echo "about to fail" >&2; exit 7;;
      3) echo "goodbye"; sleep 0.3; kill -9 $$;;
    esac'
[ "$code" = 0 ] || fail "(b) exit code $code, expected 0 (server and worker 0 succeeded)"
[ "$elapsed" -lt 10 ] || fail "(b) took ${elapsed}s"
grep -qx "\[rank 1\] worker 0 done" <<<"$out" || fail "(b) worker 0 was stopped by the other workers' failures"
grep -q "worker rank 2 exited with code 7 after .* s; the servers decide whether training goes on" <<<"$err" ||
  fail "(b) no report of worker rank 2"
grep -q "| about to fail" <<<"$err" || fail "(b) the report lacks rank 2's last lines"
grep -q "worker rank 3 killed by signal 9 (Killed)" <<<"$err" || fail "(b) no report of worker rank 3"
grep -q "| goodbye" <<<"$err" || fail "(b) the report lacks rank 3's last lines"
grep -q "training finished without workers \[2, 3\]" <<<"$err" || fail "(b) no final summary"
grep -q "ranks \[0\] were still running" <<<"$err" || fail "(b) the server was not reported as stopped"
grep -q "restarting" <<<"$err" && fail "(b) a worker failure restarted the group"
echo "ok (b): failed workers reported, worker 0 went on, server stopped after the grace, exit 0, ${elapsed}s"

# (b') Worker 0 fails: the job fails (exit 1) even though the servers succeed.
run --servers 1 --workers 2 --server-program /bin/true \
  -- sh -c '[ "$RANK" != 1 ] || exit 5'
[ "$code" = 1 ] || fail "(b') exit code $code, expected 1 (worker 0 failed)"
grep -q "worker 0 (rank 1) did not succeed" <<<"$err" || fail "(b') no note that worker 0 failed"
echo "ok (b'): failed worker 0 fails the job"

# (c) Server rank 1 fails: every rank is stopped at once, the group restarts
# once, and launch exits with the server's code.
run --servers 2 --workers 2 --max-restarts 1 \
  --server-program /bin/sh --server-arg -c \
  --server-arg 'if [ "$RANK" = 1 ]; then sleep 0.3; echo "server broke" >&2; exit 4; fi; sleep 60' \
  -- sh -c 'sleep 60'
[ "$code" = 4 ] || fail "(c) exit code $code, expected server rank 1's 4"
[ "$elapsed" -lt 10 ] || fail "(c) took ${elapsed}s: the other ranks were not stopped"
grep -q "server rank 1 failed first: exited with code 4 after .* s; stopped ranks \[0, 2, 3\]" <<<"$err" ||
  fail "(c) summary does not name server rank 1 and the stopped ranks"
grep -q "| server broke" <<<"$err" || fail "(c) summary lacks rank 1's last lines"
[ "$(grep -c 'restarting the group' <<<"$err")" = 1 ] || fail "(c) expected exactly one restart"
echo "ok (c): failed server stopped everyone, restarted once, exit 4, ${elapsed}s"

# (d) Options that do not go together.
run -n 2 --servers 1 --workers 1 -- true
[ "$code" != 0 ] && grep -q "not both" <<<"$err" || fail "(d) -n with --servers accepted"
run --servers 0 --workers 0 --nnodes 2 --master-port 1 -- true
[ "$code" != 0 ] && grep -q "at least one rank" <<<"$err" || fail "(d) a node of no ranks accepted"
run -- true
[ "$code" != 0 ] && grep -q "give -n N" <<<"$err" || fail "(d) neither -n nor --workers accepted"
echo "ok (d): conflicting options rejected"

# (e) Three nodes, one launcher each on loopback, each with its own counts:
# node 0 one server and one worker, node 1 workers only, node 2 a server only.
# The job's servers are ranks 0-1 (node 0's, then node 2's), its workers 2-4
# (node 0's, then node 1's two). Node 2's server outlives every worker on its
# node (it has none) and is not stopped; the servers exit once worker 0 is done.
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
export BRAID_TOKEN=launch-ps-test
node() {  # node K S W: runs in the background, output in $dir/nodeK.{out,err}
  "$braid" launch --nnodes 3 --node-rank "$1" --master-addr 127.0.0.1 --master-port "$port" \
    --servers "$2" --workers "$3" --stop-grace 1 \
    --server-program /bin/sh --server-arg -c \
    --server-arg "while [ ! -e '$dir/e.done' ]; do sleep 0.1; done; $show" \
    -- sh -c "$show; if [ \"\$RANK\" = 2 ]; then sleep 2; touch '$dir/e.done'; fi" \
    >"$dir/node$1.out" 2>"$dir/node$1.err" &
}
start=$(date +%s)
node 0 1 1; n0=$!
node 1 0 2; n1=$!
node 2 1 0; n2=$!
codes=
for p in $n0 $n1 $n2; do wait "$p"; codes="$codes $?"; done
elapsed=$(( $(date +%s) - start ))
out=$(cat "$dir"/node*.out); err=$(cat "$dir"/node*.err)
[ "$codes" = " 0 0 0" ] || fail "(e) exit codes$codes, expected 0 0 0"
[ "$elapsed" -lt 30 ] || fail "(e) took ${elapsed}s"
expect() {  # expect NODE RANK LOCAL_WORLD_SIZE ROLE
  grep -qx "\[rank $2\] env RANK=$2 WORLD_SIZE=5 LOCAL_WORLD_SIZE=$3 ROLE=$4 SERVERS=2" "$dir/node$1.out" ||
    fail "(e) node $1 has no $4 of rank $2"
}
expect 0 0 2 server; expect 0 2 2 worker; expect 1 3 2 worker; expect 1 4 2 worker; expect 2 1 1 server
grep -q "still running" <<<"$err" && fail "(e) a server was stopped"
echo "ok (e): 3 nodes with their own counts: servers ranks 0-1, workers 2-4, every node exit 0, ${elapsed}s"

# (f) Nodes that together have no worker: refused on every node, naming the counts.
node 0 1 0; n0=$!
node 1 1 0; n1=$!
node 2 1 0; n2=$!
codes=
for p in $n0 $n1 $n2; do wait "$p"; codes="$codes $?"; done
err=$(cat "$dir"/node*.err)
[ "$codes" != " 0 0 0" ] || fail "(f) a job without workers succeeded"
[ "$(grep -c "the job has 3 servers and 0 workers over its 3 nodes (node 0: 1 + 0, node 1: 1 + 0, node 2: 1 + 0)" <<<"$err")" = 3 ] ||
  fail "(f) not every node named the counts"
echo "ok (f): a job without workers refused on every node"

# (g) Two nodes; node 1's only worker fails. Node 0 (the server and worker 0)
# succeeds, node 1 reports that none of its workers succeeded and exits 1.
node2() {  # node2 K S W WORKER_SCRIPT
  "$braid" launch --nnodes 2 --node-rank "$1" --master-addr 127.0.0.1 --master-port "$port" \
    --servers "$2" --workers "$3" --server-program /bin/sh --server-arg -c --server-arg "sleep 1" \
    -- sh -c "$4" >"$dir/g$1.out" 2>"$dir/g$1.err" &
}
node2 0 1 1 "sleep 0.5"; n0=$!
node2 1 0 1 "exit 3"; n1=$!
wait "$n0"; c0=$?; wait "$n1"; c1=$?
[ "$c0" = 0 ] && [ "$c1" = 1 ] || { err=$(cat "$dir"/g*.err); fail "(g) exit codes $c0 $c1, expected 0 1"; }
grep -q "worker rank 2 exited with code 3" "$dir/g1.err" && grep -q "no worker of this node succeeded" "$dir/g1.err" ||
  { err=$(cat "$dir"/g1.err); fail "(g) node 1 did not report its failed worker"; }
echo "ok (g): a node whose only worker failed exits 1, the node of worker 0 exits 0"
