#!/usr/bin/env bash
# `braid profile CONFIG --device cuda --emulate --json` on a tiny char
# transformer: the JSON has the per-step figures (launches, syncs,
# allocations, bytes, host time per op), with the fused attention kernel and no
# attention scores of the sequence; without --emulate the command refuses
# with the reason.
# usage: profile_cli.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-profile.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }
for i in $(seq 200); do echo "the quick brown fox jumps over the lazy dog $i"; done >"$out/text.txt"
small=(--set data.path="$out/text.txt" --set model.d_model=32 --set model.n_heads=2 --set model.n_layers=1
       --set model.context=24 --set model.dropout=0 --set train.batch_size=4 --set train.threads=1
       --set train.out_dir="$out/run")
"$braid" profile "$config" "${small[@]}" --device cuda --emulate --json >"$out/p.json" 2>"$out/err" || fail "profile failed" "$out/err"
python3 - "$out/p.json" <<'PY' || fail "unexpected profile" "$out/p.json"
import json, sys
p = json.load(open(sys.argv[1]))
s = p["per_step"]
assert s["launches"] > 0 and s["op_calls"] > 0, s
assert s["allocations"] == 0, s              # the caching allocator after warm-up
assert s["syncs"] >= 1, s                     # the loss read, at least
assert s["square_f32_outputs"] == 0, s        # no [.., 24, 24] scores: attention is fused on the device
assert p["launches_by_kernel"]["attention_forward"] > 0, p
assert 0 < p["host_us_per_op"] < 1000, p
assert p["launches_by_kernel"]["gemm"] > 0, p
PY
if "$braid" profile "$config" "${small[@]}" --device cuda >"$out/o" 2>&1; then fail "profile without --emulate ran" "$out/o"; fi
grep -q "add --emulate" "$out/o" || fail "the refusal does not say what to do" "$out/o"
echo "braid profile --emulate: figures as JSON"
