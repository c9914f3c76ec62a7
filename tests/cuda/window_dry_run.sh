#!/usr/bin/env bash
# bench/gpu/window.sh --dry-run on a machine without a GPU: it passes, skips
# every step with a reason, and writes the whole output layout (each step's
# log, each GPT-2 run's JSON, steps.tsv, summary.json and summary.md with the
# ratio rows), so the script a lent GPU's few minutes go to is checked in CI.
# usage: window_dry_run.sh REPO_ROOT
set -euo pipefail
root=$1
out=$(mktemp -d /tmp/braid-window.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }
bash "$root/bench/gpu/window.sh" --dry-run --out "$out" --rounds 2 >"$out/stdout" 2>&1 || fail "window.sh --dry-run exited non-zero" "$out/stdout"
for step in env gpu_tests sanitizer micro_gemm micro_attention micro_layer_norm micro_elementwise \
            gpt2_braid_eager_r1 gpt2_braid_graphs_r1 gpt2_torch_eager_r1 gpt2_torch_compile_r1 \
            gpt2_braid_eager_r2 gpt2_torch_compile_r2; do
  [ -s "$out/logs/$step.log" ] || fail "no log for step $step"
  grep -q "^skipped: " "$out/logs/$step.log" || fail "step $step ran in a dry run" "$out/logs/$step.log"
  grep -qP "^$step\tskipped\t0\t.+" "$out/steps.tsv" || fail "steps.tsv lacks $step as skipped with a reason" "$out/steps.tsv"
done
[ -s "$out/json/gpt2_torch_compile_r2.json" ] || fail "no JSON for a GPT-2 run"
if grep -qP "\t(ran|failed)\t" <(grep -v '^summary' "$out/steps.tsv"); then fail "a step ran in a dry run" "$out/steps.tsv"; fi
grep -qP "^summary\tran" "$out/steps.tsv" || fail "the summary step did not run" "$out/steps.tsv"
python3 - "$out/summary.json" <<'PY' || fail "summary.json is not the expected shape" "$out/summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["dry_run"] is True
assert {"braid_eager", "braid_graphs", "torch_eager", "torch_compile"} <= set(s["gpt2"])
assert s["ratios"]["braid_eager / torch_compile"]["target"] == 1.05
assert all(x["status"] == "skipped" and x["reason"] for x in s["steps"])
PY
grep -q "braid_eager / torch_compile" "$out/summary.md" || fail "summary.md lacks the ratio rows" "$out/summary.md"
echo "window.sh --dry-run: every step skipped with its reason, layout complete"
