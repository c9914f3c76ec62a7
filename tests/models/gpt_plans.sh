#!/usr/bin/env bash
# The gpt family under every kind of plan, through `braid train` and `braid
# launch`: a tiny GPT-2-layout model (tied head) on shards of two fortune
# files, 6 SGD steps, compared by the held-out loss after them. A run
# resumed mid-epoch from a checkpoint after 3 steps, and plans that
# compute the same step as one process (data parallel, ZeRO-1/3, tensor
# parallel, a data x tensor mesh; a pipeline with an untied head against one
# process with the same) must give the same loss to 4 decimals; the plans that
# change the arithmetic (a compressing codec, local SGD) must train (loss
# below the untrained model's ln 300 = 5.70) within 0.1 of it; a pipeline cut
# between a tied head and its embedding must be refused naming the key.
# The same for the LLaMA layout under tensor and pipeline parallelism and
# grouped-query attention under ZeRO-3.
# usage: gpt_plans.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-gpt-plans.XXXXXX)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 2
near() {  # near NAME GOT WANT
  /usr/bin/python3 -c "import sys; g, w = $2, $3; sys.exit(0 if g < 5.70 and abs(g - w) < 0.1 else 1)" ||
    { echo "FAIL: $1: held-out loss $2, one process $3"; exit 1; }
  echo "ok: $1: $2 (one process $3)"
}
one=$(loss single 1)
# Stopped after 3 of the 6 steps and resumed mid-epoch from the checkpoint: the same run.
loss halves 1 train.max_steps=3 train.checkpoint_every=3 >/dev/null
same resumed "$(loss halves 1 train.resume=always)" "$one"
grep -q "resumed from .*(step 3," "$out/halves.log" || { cat "$out/halves.log"; echo "FAIL: not resumed from step 3"; exit 1; }
same dp2 "$(loss dp2 2 train.batch_size=4)" "$one"
same zero1 "$(loss zero1 2 train.batch_size=4 parallel.strategy=zero parallel.zero_stage=1)" "$one"
same zero3 "$(loss zero3 2 train.batch_size=4 parallel.strategy=zero parallel.zero_stage=3)" "$one"
same tp2 "$(loss tp2 2 parallel.tensor=2)" "$one"
same dp2_tp2 "$(loss dp2_tp2 4 train.batch_size=4 parallel.tensor=2)" "$one"
untied=$(loss single_untied 1 model.tie_embeddings=false)
same pp2_untied "$(loss pp2 2 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2)" "$untied"
# The LLaMA layout (RMSNorm, rotary positions, SwiGLU: tensor parallelism
# splits the gate and up projections alike; no biases, untied head), and
# grouped-query attention under ZeRO-3.
llama=(model.norm=rms model.position=rope model.activation=swiglu model.bias=false model.tie_embeddings=false)
one_llama=$(loss llama 1 "${llama[@]}")
same llama_tp2 "$(loss llama_tp2 2 "${llama[@]}" parallel.tensor=2)" "$one_llama"
same llama_pp2 "$(loss llama_pp2 2 "${llama[@]}" parallel.pipeline=2 parallel.microbatches=2)" "$one_llama"
one_gqa=$(loss gqa 1 "${llama[@]}" model.kv_heads=2)
same gqa_zero3 "$(loss gqa_zero3 2 "${llama[@]}" model.kv_heads=2 train.batch_size=4 parallel.strategy=zero \
  parallel.zero_stage=3)" "$one_gqa"
near codec_bf16 "$(loss bf16 2 train.batch_size=4 parallel.strategy=allreduce parallel.codec=bf16)" "$one"
near local_sgd "$(loss local_sgd 2 train.batch_size=4 parallel.strategy=local_sgd local_sgd.period=2)" "$one"
if "$braid" launch -n 2 -- "$braid" train "$out/tiny.toml" --set train.out_dir="$out/pp_tied" \
    --set parallel.pipeline=2 --set parallel.microbatches=2 >"$out/pp_tied.log" 2>&1; then
  echo "FAIL: a pipeline cut between a tied head and its embedding ran"; exit 1
fi
grep -q "set model.tie_embeddings = false" "$out/pp_tied.log" || { cat "$out/pp_tied.log"; echo "FAIL: no reason given"; exit 1; }
echo "ok: pp2 with a tied head refused: $(grep -o 'pipeline: the head.*' "$out/pp_tied.log" | head -1)"
