#!/usr/bin/env bash
# `braid launch -n 3 -- braid pbt`: three members on Fashion-MNIST for a few
# hundred steps. Member 0 must print the population table with every member,
# each member must keep a lineage file with one JSON line per round, and with
# fraction 0.5 the last-ranked member of a round must copy another (the log
# says "copied member").
# usage: pbt_launch.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-pbt.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }

timeout 300 "$braid" launch -n 3 -- "$braid" pbt "$config" --set train.max_steps=300 --set pbt.interval=2400 \
  --set pbt.batch_size=32,64 --set pbt.fraction=0.5 --set train.log_every=100 --set train.threads=1 \
  --set train.out_dir="$out/run" --summary-json "$out/summary.json" >"$out/log" 2>&1 || fail "braid pbt" "$out/log"
grep -q "pbt: 3 members" "$out/log" || fail "no population table" "$out/log"
grep -q "best member by validation" "$out/log" || fail "no best member line" "$out/log"
grep -q "copied member" "$out/log" || fail "no member ever exploited" "$out/log"
for m in 0 1 2; do
  f="$out/run/member-$m/lineage.jsonl"
  [ -s "$f" ] || fail "member $m has no lineage file" "$out/log"
  python3 -c "import json,sys; [json.loads(l)['score'] for l in open(sys.argv[1])]" "$f" ||
    fail "member $m's lineage is not JSON lines" "$f"
done
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert len(s)==3, s" "$out/summary.json" ||
  fail "summary" "$out/summary.json"
echo "pbt_launch: ok"
