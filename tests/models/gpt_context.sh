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
files=(/usr/share/games/fortunes/computers /usr/share/games/fortunes/science)
"$braid" tokenize train --vocab-size 300 --out "$out/tok" "${files[@]}" >/dev/null
"$braid" tokenize encode --tokenizer "$out/tok" --out "$out/shards/train" "${files[@]}" >/dev/null
cat >"$out/tiny.toml" <<TOML
[train]
batch_size = 8
max_steps = 6
log_every = 3
eval_every = 6
eval_steps = 5
threads = 1
progress = "lines"
deterministic = true
[model]
name = "gpt"
n_layers = 2
n_heads = 4
d_model = 32
context = 16
[optim]
name = "sgd"
lr = 0.5
momentum = 0.0
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
TOML
run() {  # run NAME PROCESSES KEY=VALUE...: the run's output in $out/NAME.log; its status
  local name=$1 n=$2; shift 2
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --set train.out_dir="$out/$name" "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1
}
loss() {  # loss NAME PROCESSES KEY=VALUE...: prints rank 0's final held-out loss
  run "$@" || { cat "$out/$1.log" >&2; echo "FAIL: $1" >&2; exit 1; }
  grep -Eo "final test loss [0-9.]+" "$out/$1.log" | head -1 | awk '{print $4}'
}
same() {  # same NAME GOT WANT
  if [ "$2" != "$3" ]; then echo "FAIL: $1: held-out loss $2, one process $3"; exit 1; fi
  echo "ok: $1: $2 (one process $3)"
}
refused() {  # refused NAME EXPECTED PROCESSES KEY=VALUE...
  local name=$1 expected=$2; shift 2
  if run "$name" "$@"; then echo "FAIL: $name ran"; exit 1; fi
  grep -qF "$expected" "$out/$name.log" || { cat "$out/$name.log"; echo "FAIL: $name: no '$expected'"; exit 1; }
  echo "ok: $name refused: $(grep -oF "$expected" "$out/$name.log" | head -1)"
}
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
