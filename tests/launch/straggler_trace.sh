#!/bin/sh
# straggler_trace.sh BRAID CONFIG
# Three ranks train data-parallel with rank 1 sleeping 40 ms per step
# (train.straggler_rank/straggler_ms) and the timeline on (train.trace). The
# trainer must name rank 1, and only rank 1, as a straggler (its output,
# metrics.jsonl, the launcher's summary), and rank 0 must merge the three
# ranks' timelines into one trace with the step phases and the collectives.
set -u
braid=$1 config=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
timeout -k 5 240 "$braid" launch -n 3 -- "$braid" train "$config" --set parallel.strategy=allreduce \
  --set train.max_steps=40 --set train.eval_every=0 --set train.threads=1 --set train.progress=lines \
  --set train.straggler_rank=1 --set train.straggler_ms=40 --set train.straggler_every=10 \
  --set train.trace=true --set train.out_dir="$dir/run" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" = 0 ] || fail "training exited with $rc"
grep -q "straggler: rank 1 works" "$dir/out" || fail "rank 1 was not named"
grep "straggler: rank [02] works" "$dir/out" && fail "a rank that is not slow was named"
grep -q "braid launch: stragglers named during the run:" "$dir/out" || fail "the launcher's summary does not name it"
grep -q '"event":"straggler".*"rank":1' "$dir/run/metrics.jsonl" || fail "metrics.jsonl has no straggler record"
trace="$dir/run/trace.json"
[ -f "$trace" ] || fail "rank 0 did not merge the timelines"
for pid in 0 1 2; do grep -q "\"pid\":$pid," "$trace" || fail "no events of rank $pid in the trace"; done
for name in forward backward optimizer data "gradient sync" allreduce "wait on peer"; do
  grep -q "\"name\":\"$name\"" "$trace" || fail "no $name span in the trace"
done
"$braid" inspect trace "$dir/run" --out "$dir/again.json" || fail "braid inspect trace failed"
[ -s "$dir/again.json" ] || fail "braid inspect trace wrote nothing"
echo ok
