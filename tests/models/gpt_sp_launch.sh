#!/usr/bin/env bash
# Sequence parallelism under tensor parallelism through `braid train` and
# `braid launch`: the tiny gpt of gpt_plans.sh (16 tokens a sequence, 4 heads,
# tied head), 6 SGD steps, compared by the held-out loss after them. TP 2 with
# parallel.sequence_parallel = true over shared memory and over tcp, with the
# collectives overlapped and blocking, beside data (all-reduce, ZeRO-1) and
# pipeline axes, with full and selective recompute, and the LLaMA layout
# (rotary positions, RMS norms, SwiGLU), must give one process's loss to 4
# decimals. Bad input is refused naming the keys.
# usage: gpt_sp_launch.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-gpt-sp.XXXXXX)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 2
sp=(parallel.tensor=2 parallel.sequence_parallel=true)
one=$(loss single 1)
same tp2_sp "$(loss tp2_sp 2 "${sp[@]}")" "$one"
same tp2_sp_tcp "$(loss tp2_sp_tcp 2 "${sp[@]}" parallel.transport=tcp)" "$one"
same tp2_sp_blocking_tcp "$(loss tp2_sp_blocking_tcp 2 "${sp[@]}" parallel.tp_overlap=false parallel.transport=tcp)" "$one"
same tp2_overlap_no_sp "$(loss tp2_overlap 2 parallel.tensor=2)" "$one"
same tp2_sp_full "$(loss tp2_sp_full 2 "${sp[@]}" parallel.recompute=full)" "$one"
same tp2_sp_selective "$(loss tp2_sp_selective 2 "${sp[@]}" parallel.recompute=selective)" "$one"
same dp2_tp2_sp_zero1 "$(loss dp2_tp2_sp_zero1 4 train.batch_size=4 "${sp[@]}" parallel.strategy=zero \
  parallel.zero_stage=1)" "$one"
untied=$(loss single_untied 1 model.tie_embeddings=false)
same pp2_tp2_sp_untied "$(loss pp2_tp2_sp 4 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2 \
  "${sp[@]}")" "$untied"
llama=(model.norm=rms model.position=rope model.activation=swiglu model.bias=false model.tie_embeddings=false)
same llama_tp2_sp "$(loss llama_tp2_sp 2 "${llama[@]}" "${sp[@]}")" "$(loss llama 1 "${llama[@]}")"
refused no_tensor "parallel.sequence_parallel = true splits the sequence over the tensor axis; parallel.tensor = 1 has none" \
  2 parallel.sequence_parallel=true
refused segments "parallel.sequence_parallel cuts each sequence into parallel.tensor = 2 equal segments; model.context = 15 tokens do not divide into them" \
  2 "${sp[@]}" model.context=15
refused context "parallel.sequence_parallel = true with parallel.context = 2 is not built" \
  4 "${sp[@]}" parallel.context=2
