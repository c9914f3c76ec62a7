#!/usr/bin/env bash
# The commands that compute only on the CPU refuse a config that asks for a
# GPU, in one line naming train.device, instead of silently running or
# predicting the CPU's step: braid sim (its op costs are CPU-measured), braid
# graph (meta capture, CPU --run) and braid train with model.name =
# sparse_linear (the parameter-server workers). The CPU config still works.
# Usage: device_refused.sh BRAID CONFIG_DIR
set -euo pipefail
braid=$1
configs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CACHE_DIR=$tmp/cache
fail() { echo "FAIL: $*"; exit 1; }

# refused WHAT COMMAND...: COMMAND exits non-zero at once with one line naming train.device and WHAT.
refused() {
  local what=$1
  shift
  local start=$SECONDS
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "$what ran with train.device = cuda: $(cat "$tmp/out")"; fi
  grep -q "train.device = cuda has no effect on $what" "$tmp/err" || fail "$what: the error does not name the key: $(cat "$tmp/err")"
  [[ $(grep -c . "$tmp/err") -eq 1 ]] || fail "$what: not one line: $(cat "$tmp/err")"
  (( SECONDS - start < 20 )) || fail "$what: refused only after $((SECONDS - start)) s (something was measured first)"
  echo "refused: $(cat "$tmp/err")"
}

refused "braid sim" "$braid" sim "$configs/fashion_mlp.toml" --world 2 --set train.device=cuda
refused "braid graph" "$braid" graph "$configs/fashion_mlp.toml" --set train.device=cuda
refused "braid graph" "$braid" graph "$configs/fashion_mlp.toml" --set train.device=cuda --ranks 2
refused "model.name = sparse_linear" "$braid" train "$configs/sparse_ps.toml" --set train.device=cuda \
  --set data.path="$tmp/none.libsvm" --set train.out_dir="$tmp/run"

# The CPU is still accepted (the analysis of the graph takes no measurement).
"$braid" graph "$configs/fashion_mlp.toml" --set train.device=cpu >"$tmp/out" || fail "braid graph on the cpu: $(cat "$tmp/out")"
grep -q "captured" "$tmp/out" || fail "braid graph printed no capture: $(cat "$tmp/out")"
echo "PASS"
