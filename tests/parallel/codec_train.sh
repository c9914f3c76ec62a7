#!/usr/bin/env bash
# Training through gradient codecs: 2 workers under `braid launch` over tcp
# on loopback train the Fashion-MNIST MLP for the same number of steps with
# parallel.codec = none and each codec. fp16, bf16, topk and powersgd must end
# within 1 point of test accuracy of the uncompressed run. onebit and qsgd are
# reported, each line saying whether it is within 1 point, and held only to 3
# points (a broken codec loses far more): onebit, though it has error
# feedback, ends 0.9-1.3 points below none at 600 steps (seeds 0-2, measured
# 2026-11-26 on the 2-core dev box), and qsgd is unbiased but noisy. The
# last line names the codecs that are not within 1 point. Every codec's
# metrics.jsonl must carry its byte figures with fewer bytes on the wire than
# in. One run also checkpoints and resumes, so the codec memories go through
# a checkpoint.
# usage: codec_train.sh BRAID_BINARY CONFIG
set -euo pipefail
braid=$1
config=$2
out=$(mktemp -d /tmp/braid-codec-train.XXXXXX)
trap 'rm -rf "$out"' EXIT
steps=${CODEC_TRAIN_STEPS:-600}
common=(--set train.batch_size=64 --set train.log_every=50 --set train.threads=1 --set train.progress=lines
        --set parallel.transport=tcp --set parallel.strategy=allreduce --set train.max_steps="$steps"
        --set train.eval_steps=0)
run() {  # run NAME KEY=VALUE...
  local name=$1; shift
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  timeout 900 "$braid" launch -n 2 -- "$braid" train "$config" "${common[@]}" "${sets[@]}" \
    --set train.out_dir="$out/$name" --summary-json "$out/$name.json" >"$out/$name.log" 2>&1 ||
    { tail -30 "$out/$name.log"; echo "FAIL: $name"; exit 1; }
}
top1() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval"]["top1"])' "$1"; }
run none parallel.codec=none
base=$(top1 "$out/none.json")
echo "none: top-1 $base after $steps steps"
status=0
missed=()  # codecs more than 1 point below none
within() { /usr/bin/python3 -c "import sys; sys.exit(0 if $base - $acc <= $1 else 1)"; }  # within FRACTION
for c in fp16 bf16 onebit topk powersgd qsgd; do
  extra=()
  [ "$c" = topk ] && extra=(codec.topk_ratio=0.05)
  [ "$c" = powersgd ] && extra=(codec.powersgd_rank=4 codec.warmup_steps=20)
  [ "$c" = qsgd ] && extra=(codec.qsgd_levels=15)
  run "$c" parallel.codec="$c" "${extra[@]}"
  acc=$(top1 "$out/$c.json")
  figures=$(/usr/bin/python3 - "$out/$c/metrics.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"codec"' in l]
assert recs, "no codec figures in metrics.jsonl"
raw = sum(r["codec"]["raw_bytes"] for r in recs)
wire = sum(r["codec"]["wire_bytes"] for r in recs)
enc = sum(r["codec"]["encode_ms"] for r in recs)
dec = sum(r["codec"]["decode_ms"] for r in recs)
assert 0 < wire < raw, (raw, wire)
print(f"ratio {raw / wire:.1f}x, encode {enc:.0f} ms, decode {dec:.0f} ms in all")
PY
) || { echo "FAIL: $c figures"; exit 1; }
  gap=$(/usr/bin/python3 -c "print(f'{100 * ($base - $acc):.2f}')")
  if within 0.01; then
    echo "ok: $c: top-1 $acc ($gap points below none, within 1 point); $figures"
  elif [ "$c" = onebit ] || [ "$c" = qsgd ]; then
    missed+=("$c ($gap)")
    if within 0.03; then
      echo "ok: $c (held to 3 points, not 1): top-1 $acc, NOT within 1 point: $gap points below none; $figures"
    else
      echo "FAIL: $c: top-1 $acc, $gap points below none ($base), more than 3; $figures"; status=1
    fi
  else
    missed+=("$c ($gap)")
    echo "FAIL: $c: top-1 $acc, $gap points below none ($base); $figures"; status=1
  fi
done
if [ ${#missed[@]} -eq 0 ]; then
  echo "every codec within 1 point of none after $steps steps"
else
  echo "not within 1 point of none after $steps steps (points below): ${missed[*]}"
fi
# The codec memories through a checkpoint: a resumed run loads every rank's.
run ckpt parallel.codec=topk codec.topk_ratio=0.05 train.max_steps=40 train.checkpoint_every=20
run ckpt parallel.codec=topk codec.topk_ratio=0.05 train.max_steps=60 train.resume=auto
grep -q "resumed from .*(step 40," "$out/ckpt.log" || { cat "$out/ckpt.log"; echo "FAIL: not resumed"; exit 1; }
/usr/bin/python3 - "$out/ckpt" <<'PY' || { echo "FAIL: no codec memory in the checkpoint"; exit 1; }
import glob, json, struct, sys
f = sorted(glob.glob(sys.argv[1] + "/ckpt-*.safetensors"))[-1]
raw = open(f, "rb").read()
names = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
assert any(n.startswith("plan.r0.") for n in names) and any(n.startswith("plan.r1.") for n in names), list(names)
PY
echo "ok: topk memories of both ranks in the checkpoint and resumed"
exit $status
