#!/usr/bin/env bash
# Context parallelism through `braid train` and `braid launch` (shared memory,
# and tcp for one run): the tiny gpt of gpt_plans.sh (16 tokens a sequence, 4
# heads, tied head), 6 SGD steps,
# compared by the held-out loss after them. The sequence split over 2 ranks
# (ring and Ulysses), over 4 (ring), and the context axis beside data (with
# all-reduce and ZeRO-1, 2 and 3), tensor and pipeline (1F1B, GPipe) axes and
# with full and selective recompute must give one process's loss to 4
# decimals; so must the LLaMA layout (rotary positions, grouped-query
# attention) under both modes. Bad input is refused naming the keys.
# usage: gpt_context.sh BRAID_BINARY
set -euo pipefail
braid=$1
out=$(mktemp -d /tmp/braid-gpt-context.XXXXXX)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/tiny_gpt_lib.sh"
tiny_gpt_shards
tiny_gpt_toml 2
one=$(loss single 1)
same cp2_ring "$(loss cp2_ring 2 parallel.context=2)" "$one"
same cp2_ulysses "$(loss cp2_ulysses 2 parallel.context=2 parallel.context_mode=ulysses)" "$one"
same cp2_ring_tcp "$(loss cp2_ring_tcp 2 parallel.context=2 parallel.transport=tcp)" "$one"
# Stopped after 3 of the 6 steps and resumed from the checkpoint (written by context rank 0): the same run.
loss cp2_halves 2 parallel.context=2 train.max_steps=3 train.checkpoint_every=3 >/dev/null
same cp2_resumed "$(loss cp2_halves 2 parallel.context=2 train.resume=always)" "$one"
grep -q "resumed from .*(step 3," "$out/cp2_halves.log" || { cat "$out/cp2_halves.log"; echo "FAIL: not resumed"; exit 1; }
same cp4_ring "$(loss cp4_ring 4 parallel.context=4)" "$one"
same dp2_cp2 "$(loss dp2_cp2 4 train.batch_size=4 parallel.context=2)" "$one"
same dp2_cp2_zero1 "$(loss dp2_cp2_zero1 4 train.batch_size=4 parallel.context=2 parallel.strategy=zero \
  parallel.zero_stage=1)" "$one"
same dp2_cp2_zero2 "$(loss dp2_cp2_zero2 4 train.batch_size=4 parallel.context=2 parallel.strategy=zero \
  parallel.zero_stage=2)" "$one"
same cp2_zero3 "$(loss cp2_zero3 2 parallel.context=2 parallel.strategy=zero parallel.zero_stage=3)" "$one"
same cp2_recompute_full "$(loss cp2_full 2 parallel.context=2 parallel.recompute=full)" "$one"
same cp2_ulysses_recompute_selective "$(loss cp2_ul_sel 2 parallel.context=2 parallel.context_mode=ulysses \
  parallel.recompute=selective)" "$one"
same tp2_cp2 "$(loss tp2_cp2 4 parallel.tensor=2 parallel.context=2)" "$one"
same tp2_cp2_ulysses "$(loss tp2_cp2_ulysses 4 parallel.tensor=2 parallel.context=2 parallel.context_mode=ulysses)" "$one"
untied=$(loss single_untied 1 model.tie_embeddings=false)
same pp2_cp2_untied "$(loss pp2_cp2 4 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2 \
  parallel.context=2)" "$untied"
same pp2_cp2_gpipe "$(loss pp2_cp2_gpipe 4 model.tie_embeddings=false parallel.pipeline=2 parallel.microbatches=2 \
  parallel.context=2 parallel.schedule=gpipe)" "$untied"
# The LLaMA layout: rotary positions at the tokens' global positions, and
# grouped-query attention (2 key/value heads, split over 2 ranks by Ulysses).
llama=(model.norm=rms model.position=rope model.activation=swiglu model.bias=false model.tie_embeddings=false
  model.kv_heads=2)
one_llama=$(loss llama 1 "${llama[@]}")
same llama_cp2_ring "$(loss llama_cp2_ring 2 "${llama[@]}" parallel.context=2)" "$one_llama"
same llama_cp2_ulysses "$(loss llama_cp2_ulysses 2 "${llama[@]}" parallel.context=2 parallel.context_mode=ulysses)" \
  "$one_llama"
refused chunks "parallel.context = 3 with parallel.context_mode = ring cuts each sequence into 6 equal chunks; model.context = 16 tokens do not divide into them" 3 parallel.context=3
refused heads "parallel.context_mode = ulysses splits the heads over parallel.context = 2: 4 heads and 1 key/value heads" \
  2 parallel.context=2 parallel.context_mode=ulysses model.kv_heads=1
refused model "parallel.context = 2 splits the sequences of model.name = gpt; model.name = char_transformer is not one" \
  2 parallel.context=2 model.name=char_transformer
