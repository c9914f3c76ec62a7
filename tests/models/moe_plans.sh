#!/usr/bin/env bash
# Mixture of experts under expert parallelism, through `braid train` and
# `braid launch`: a tiny gpt whose two blocks' MLPs are 4 experts (top-2) on
# shards of two fortune files. Each plan must compute what one process holding
# every expert computes with one micro-batch per data rank: the router's
# groups, capacities and auxiliary losses are per micro-batch as they are per
# rank, so each rank reads one sequence a micro-batch (a data rank's share
# of the sampler's order interleaves with the others'; one-row micro-batches
# make the same groups). Compared: the weights after the first SGD step (lr
# 0.5) within 5e-6, i.e. first-step gradients within 1e-5 (the plan's
# checkpoint gathers every expert), and the held-out loss after 40 steps
# within 1e-3. Plans:
# EP=2 and EP=4 (one expert a rank), each dropless and with token dropping
# (capacity factor 1), DP=2 x EP=2, a two-stage pipeline of MoE blocks, TP=2 and TP=2 x
# EP=2 (attention split, experts whole on each tensor rank); ZeRO-1 and -2
# x EP; gradient clipping under EP (the norm counts each expert once) and
# with ZeRO; auxiliary-loss-free (bias) balancing under EP; an EP checkpoint
# resumed by one process and back, and one of ZeRO-2 x EP with momentum
# against one process throughout.
# Bad input: 4 experts over 3 ranks, top_k > experts, EP without MoE layers,
# ZeRO-3 with EP, bias balancing with an averaging strategy.
# usage: moe_plans.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-moe-plans.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
cat >"$out/tiny.toml" <<TOML
[train]
batch_size = 8
log_every = 10
eval_every = 1000
threads = 1
progress = "lines"
deterministic = true
[model]
name = "gpt"
n_layers = 2
n_heads = 4
d_model = 32
context = 16
tie_embeddings = false
moe.experts = 4
moe.top_k = 2
[optim]
name = "sgd"
lr = 0.5
momentum = 0.0
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
TOML
run() {  # run NAME PROCESSES STEPS KEY=VALUE...: the run's log in $out/NAME.log, checkpoint in $out/NAME
  local name=$1 n=$2 steps=$3; shift 3
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --set train.out_dir="$out/$name" --set train.max_steps="$steps" "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; echo "FAIL: $name" >&2; exit 1; }
}
loss() { grep -Eo "final test loss [0-9.]+" "$out/$1.log" | head -1 | awk '{print $4}'; }
compare() {  # compare NAME REFERENCE PROCESSES KEY=VALUE...: the plan against one process with REFERENCE's settings
  local name=$1 ref=$2 n=$3; shift 3
  run "$name.1" "$n" 1 "$@"
  run "$name.40" "$n" 40 "$@"
  /usr/bin/python3 - "$out/$name.1" "$out/$ref.1" <<'PY' ||
import glob, json, struct, sys
import numpy as np
def read(folder):  # name -> every stored copy (pipeline stages and tensor ranks write their own files)
    out = {}
    for path in glob.glob(folder + "/**/ckpt-00000001.safetensors", recursive=True):
        raw = open(path, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        for k, v in header.items():
            if k.startswith("model."):
                a = raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
                out.setdefault(k, []).append(np.frombuffer(a, np.float32).reshape(v["shape"]))
    return out
got, want = read(sys.argv[1]), read(sys.argv[2])
assert got.keys() == want.keys(), sorted(set(got) ^ set(want))
# Tensor-parallel slices have other shapes and are left to the loss check; whole copies (every
# MoE parameter included) must all match.
diffs = [(float(np.abs(g - want[k][0]).max()), k) for k in want for g in got[k] if g.shape == want[k][0].shape]
compared = {k for _, k in diffs}
assert all(k in compared for k in want if ".moe." in k), "an MoE parameter was not compared"
worst = max(diffs)
print(f"  weights after step 1: largest difference {worst[0]:.2e} ({worst[1]}), {len(compared)} of {len(want)} compared")
sys.exit(0 if worst[0] <= 5e-6 else 1)
PY
    { echo "FAIL: $name: first-step weights differ from one process"; exit 1; }
  local got want
  got=$(loss "$name.40") want=$(loss "$ref.40")
  /usr/bin/python3 -c "import sys; sys.exit(0 if abs($got - $want) <= 1e-3 else 1)" ||
    { echo "FAIL: $name: held-out loss $got after 40 steps, one process $want"; exit 1; }
  if [[ " $* " == *" parallel.expert="* ]]; then
    grep -q "experts over" "$out/$name.40.log" || { cat "$out/$name.40.log"; echo "FAIL: $name: no expert-parallel sync"; exit 1; }
  fi
  echo "ok: $name: held-out loss $got (one process $want)"
}
for drop in 0 1; do
  cf=(model.moe.capacity_factor=$drop)
  for m in 2 4; do
    run "one_m${m}_cf$drop.1" 1 1 "${cf[@]}" train.batch_size=$m parallel.microbatches=$m
    run "one_m${m}_cf$drop.40" 1 40 "${cf[@]}" train.batch_size=$m parallel.microbatches=$m
  done
  compare "ep2_cf$drop" "one_m2_cf$drop" 2 "${cf[@]}" train.batch_size=1 parallel.expert=2
  compare "ep4_cf$drop" "one_m4_cf$drop" 4 "${cf[@]}" train.batch_size=1 parallel.expert=4
done
grep -q '"dropped":[1-9]' "$out/ep2_cf1.40/metrics.jsonl" || { echo "FAIL: capacity factor 1 dropped no token"; exit 1; }
grep -q '"event":"moe"' "$out/ep2_cf0.40/metrics.jsonl" || { echo "FAIL: no router statistics in metrics.jsonl"; exit 1; }
compare dp2_ep2 one_m4_cf0 4 train.batch_size=1 parallel.expert=2
compare pp2_ep2 one_m4_cf0 4 train.batch_size=2 parallel.pipeline=2 parallel.microbatches=2 parallel.expert=2
# ZeRO-1 and -2 with DP=2 x EP=2: the rest split over the data axis, each expert over its replicas.
compare zero1_dp2_ep2 one_m4_cf0 4 train.batch_size=1 parallel.expert=2 parallel.strategy=zero parallel.zero_stage=1
compare zero2_dp2_ep2 one_m4_cf0 4 train.batch_size=1 parallel.expert=2 parallel.strategy=zero parallel.zero_stage=2
compare zero2_pp2_ep2 one_m4_cf0 4 train.batch_size=2 parallel.pipeline=2 parallel.microbatches=2 parallel.expert=2 \
  parallel.strategy=zero parallel.zero_stage=2
# Gradient clipping (a small limit, so every step clips): the norm counts every expert once.
clip=(train.grad_clip=0.05)
for m in 2 4; do
  run "one_m${m}_clip.1" 1 1 "${clip[@]}" train.batch_size=$m parallel.microbatches=$m
  run "one_m${m}_clip.40" 1 40 "${clip[@]}" train.batch_size=$m parallel.microbatches=$m
done
compare ep2_clip one_m2_clip 2 "${clip[@]}" train.batch_size=1 parallel.expert=2
compare dp2_ep2_clip one_m4_clip 4 "${clip[@]}" train.batch_size=1 parallel.expert=2
compare zero2_dp2_ep2_clip one_m4_clip 4 "${clip[@]}" train.batch_size=1 parallel.expert=2 parallel.strategy=zero \
  parallel.zero_stage=2
# Auxiliary-loss-free balancing: the bias moves by the load of every data rank's tokens, so EP routes as one process.
bias=(model.moe.balance=bias model.moe.bias_rate=0.01)
for m in 2 4; do
  run "one_m${m}_bias.1" 1 1 "${bias[@]}" train.batch_size=$m parallel.microbatches=$m
  run "one_m${m}_bias.40" 1 40 "${bias[@]}" train.batch_size=$m parallel.microbatches=$m
done
compare ep2_bias one_m2_bias 2 "${bias[@]}" train.batch_size=1 parallel.expert=2
compare dp2_ep2_bias one_m4_bias 4 "${bias[@]}" train.batch_size=1 parallel.expert=2
# Tensor parallelism on the attention, the MoE MLPs whole on each tensor rank; then its data axis split by EP.
compare tp2 one_m2_cf0 2 train.batch_size=2 parallel.microbatches=2 parallel.tensor=2
compare tp2_ep2 one_m2_cf0 4 train.batch_size=1 parallel.tensor=2 parallel.expert=2
# A checkpoint of an EP run (every expert and its optimizer buffers gathered) continues in one
# process, whose checkpoint continues under EP again.
ck=(train.out_dir="$out/ck" train.checkpoint_every=2 train.resume=auto)
run ck_ep 2 4 "${ck[@]}" train.batch_size=1 parallel.expert=2
run ck_one 1 6 "${ck[@]}" train.batch_size=2 parallel.microbatches=2
run ck_ep_again 2 8 "${ck[@]}" train.batch_size=1 parallel.expert=2
grep -q "resumed from .*(step 4," "$out/ck_one.log" && grep -q "resumed from .*(step 6," "$out/ck_ep_again.log" ||
  { cat "$out/ck_one.log" "$out/ck_ep_again.log"; echo "FAIL: EP checkpoints do not resume across plans"; exit 1; }
echo "ok: EP -> one process -> EP checkpoints resume"
# ZeRO-2 x EP checkpoints with momentum (the optimizer's buffers of both parameter groups gathered,
# then sliced again): EP+ZeRO -> one process -> EP+ZeRO equals one process throughout.
mom=(optim.momentum=0.9 train.checkpoint_every=2 train.resume=auto)
zero=(train.batch_size=1 parallel.expert=2 parallel.strategy=zero parallel.zero_stage=2)
run ck_zero_ep 4 4 "${mom[@]}" train.out_dir="$out/ckz" "${zero[@]}"
run ck_zero_one 1 6 "${mom[@]}" train.out_dir="$out/ckz" train.batch_size=4 parallel.microbatches=4
run ck_zero_again 4 8 "${mom[@]}" train.out_dir="$out/ckz" "${zero[@]}"
run ck_zero_ref 1 8 "${mom[@]}" train.out_dir="$out/ckz_ref" train.batch_size=4 parallel.microbatches=4
grep -q "resumed from .*(step 6," "$out/ck_zero_again.log" || { cat "$out/ck_zero_again.log"; echo "FAIL: no resume"; exit 1; }
/usr/bin/python3 - "$out/ckz/ckpt-00000008.safetensors" "$out/ckz_ref/ckpt-00000008.safetensors" <<'PY' ||
import json, struct, sys
import numpy as np
def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}
got, want = read(sys.argv[1]), read(sys.argv[2])
assert got.keys() == want.keys(), sorted(set(got) ^ set(want))
assert any(k.startswith("optim") for k in want), sorted(want)[:5]
worst = max((float(np.abs(got[k] - want[k]).max()), k) for k in want)
print(f"  after 8 steps across EP+ZeRO-2 / one process / EP+ZeRO-2: largest difference {worst[0]:.2e} ({worst[1]})")
sys.exit(0 if worst[0] <= 1e-5 else 1)
PY
  { echo "FAIL: EP + ZeRO checkpoints do not continue as one process"; exit 1; }
echo "ok: EP + ZeRO-2 -> one process -> EP + ZeRO-2 checkpoints resume, momentum included"
refused() {  # refused NAME PROCESSES PATTERN KEY=VALUE...
  local name=$1 n=$2 pattern=$3; shift 3
  if (run "$name" "$n" 1 "$@") 2>/dev/null; then echo "FAIL: $name was not refused"; exit 1; fi
  grep -q "$pattern" "$out/$name.log" || { cat "$out/$name.log"; echo "FAIL: $name: no '$pattern'"; exit 1; }
  echo "ok: $name refused"
}
refused experts_over_3 3 "model.moe.experts = 4 is not divisible by parallel.expert = 3" train.batch_size=1 parallel.expert=3
refused top_k 1 "model.moe.top_k = 5 exceeds model.moe.experts = 4" model.moe.top_k=5
refused no_moe 2 "parallel.expert = 2 needs mixture-of-experts layers" model.moe.experts=0 parallel.expert=2
refused zero3 4 "parallel.expert = 2 with parallel.zero_stage = 3" train.batch_size=1 parallel.expert=2 \
  parallel.strategy=zero parallel.zero_stage=3
refused bias_local_sgd 2 "model.moe.balance = bias with parallel.strategy = local_sgd" train.batch_size=1 \
  model.moe.balance=bias parallel.strategy=local_sgd
echo "all moe plans ok"
