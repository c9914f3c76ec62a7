#!/usr/bin/env bash
# `braid generate`, `braid eval`, `braid export` and `braid train --set
# train.init=` against transformers (tests/models/hf_ref.py under .venv),
# on tiny models with the tokenizer fixture of tests/text (1000 ids):
#   - greedy `braid generate --json` on HF GPT-2 and LLaMA folders equals
#     transformers' generate(do_sample=False) token for token;
#   - `braid eval` equals transformers' loss over the same windows;
#   - a prompt longer than the context is refused, or cut with --truncate;
#   - train.init = an HF folder (learning rate 0) starts from exactly its
#     weights; a mismatched width names the tensor and both shapes, a
#     mismatched head count names both values; train.init = a braid run too;
#   - `braid export --hf` of braid-trained GPT-2 and LLaMA layouts loads in
#     transformers with the loss braid computes, tokenizer included.
# usage: hf_cli.sh BRAID_BINARY TESTS_DIR   (exit 77: .venv absent, skipped)
set -euo pipefail
braid=$1
tests=$2
python=$tests/../.venv/bin/python
if [ ! -x "$python" ]; then
  echo "SKIP: $python is absent: scripts/setup makes .venv with transformers, the oracle of this test"
  exit 77
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 BRAID_THREADS=1
ref() { "$python" "$tests/models/hf_ref.py" "$@"; }
out=$(mktemp -d /tmp/braid-hf-cli.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && cat "$2"; exit 1; }
json() {  # json FILE EXPR: a field of a JSON document
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($2)" "$1"
}
close() {  # close A B: |A - B| <= 1e-4 (1 + |B|)
  python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-4 * (1 + abs(b)))" "$1" "$2"
}
tok=$tests/text/fixtures/tokenizer.json

# Token shards of a license text, the tokenizer beside them.
mkdir -p "$out/shards"
cp "$tok" "$out/shards/tokenizer.json"
"$braid" tokenize encode --tokenizer "$tok" --out "$out/shards/train" /usr/share/common-licenses/GPL-3 \
  >"$out/encode.log" 2>&1 || fail "tokenize encode" "$out/encode.log"
python3 - "$out/shards/train-00000.tok" "$out/ids.json" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
width, count = struct.unpack_from("<I", b, 12)[0], struct.unpack_from("<Q", b, 16)[0]
ids = struct.unpack_from("<%d%s" % (count, "H" if width == 2 else "I"), b, 32)
json.dump(list(ids[:300]), open(sys.argv[2], "w"))
EOF

for arch in gpt2 llama; do
  hf=$out/hf_$arch
  ref tiny "$hf" "$arch" 1000 >"$out/tiny.log" 2>&1 || fail "hf_ref tiny $arch" "$out/tiny.log"
  cp "$tok" "$hf/tokenizer.json"
  "$braid" generate "$hf" --prompt "This License applies to" --tokens 12 --temperature 0 --json \
    >"$out/gen_$arch.json" 2>"$out/gen.log" || fail "generate $arch" "$out/gen.log"
  cat "$out/gen_$arch.json"
  prompt=$(json "$out/gen_$arch.json" "json.dumps(d['prompt_ids'])")
  [ "$(json "$out/gen_$arch.json" "d['prompt']")" = "This License applies to" ] || fail "prompt text $arch" "$out/gen_$arch.json"
  theirs=$(ref generate "$hf" "$prompt" 12 2>"$out/ref.log") || fail "hf_ref generate $arch" "$out/ref.log"
  mine=$(json "$out/gen_$arch.json" "json.dumps(d['new_ids'])")
  [ "$mine" = "$theirs" ] || fail "$arch greedy: braid $mine, transformers $theirs"

  "$braid" eval "$hf" --tokens "$out/ids.json" --context 64 --json >"$out/eval_$arch.json" 2>"$out/eval.log" ||
    fail "eval $arch" "$out/eval.log"
  theirs=$(ref loss "$hf" "$out/ids.json" 64 2>"$out/ref.log") || fail "hf_ref loss $arch" "$out/ref.log"
  mine_loss=$(json "$out/eval_$arch.json" "d['loss']")
  their_loss=$(python3 -c "import json, sys; print(json.loads(sys.argv[1])['loss'])" "$theirs")
  close "$mine_loss" "$their_loss" || fail "$arch eval loss: braid $mine_loss, transformers $their_loss"
  [ "$(json "$out/eval_$arch.json" "d['tokens']")" = 299 ] || fail "$arch eval tokens" "$out/eval_$arch.json"
done
hf=$out/hf_gpt2

# Context: 60 prompt ids + 12 new exceed 64 positions.
long=$(python3 -c "print(list(range(100, 160)))")
if "$braid" generate "$hf" --prompt-ids "$long" --tokens 12 >"$out/long.log" 2>&1; then fail "a long prompt was accepted"; fi
grep -qF "a prompt of 60 tokens and --tokens 12 exceed the model's context of 64 positions" "$out/long.log" ||
  fail "long prompt message" "$out/long.log"
"$braid" generate "$hf" --prompt-ids "$long" --tokens 12 --truncate --json >"$out/trunc.json" 2>"$out/trunc.log" ||
  fail "--truncate" "$out/trunc.log"
[ "$(json "$out/trunc.json" "d['prompt_tokens_dropped']")" = 8 ] || fail "8 tokens dropped" "$out/trunc.json"
[ "$(json "$out/trunc.json" "d['prompt_ids'][0]")" = 108 ] || fail "the oldest tokens dropped" "$out/trunc.json"
# Sampling is reproducible under a seed.
for i in 1 2; do
  "$braid" generate "$hf" --prompt "Everyone is" --tokens 8 --temperature 0.8 --top-k 50 --top-p 0.9 --seed 7 \
    --json >"$out/sample_$i.json" || fail "sampling"
done
[ "$(json "$out/sample_1.json" "d['new_ids']")" = "$(json "$out/sample_2.json" "d['new_ids']")" ] ||
  fail "two runs with one seed differ"

# Training from the HF folder, and from scratch in both layouts.
cat >"$out/gpt.toml" <<EOF
[train]
epochs = 1
batch_size = 4
max_steps = 2
checkpoint_every = 2
eval_every = 0
log_every = 1
threads = 1
progress = "lines"
[model]
name = "gpt"
d_model = 32
n_heads = 4
n_layers = 2
context = 64
[optim]
name = "adamw"
lr = 0.0
[data]
name = "tokens"
path = "$out/shards/train-*.tok"
workers = 0
EOF
train() {  # train OUT_DIR LOG --set ...
  local dir=$1 log=$2
  shift 2
  "$braid" train "$out/gpt.toml" --set train.out_dir="$dir" "$@" >"$log" 2>&1
}
train "$out/from_hf" "$out/from_hf.log" --set train.init="$hf" || fail "train.init = HF folder" "$out/from_hf.log"
"$braid" eval "$out/from_hf" --tokens "$out/ids.json" --json >"$out/eval_from_hf.json" ||
  fail "eval of the run started from HF"
close "$(json "$out/eval_from_hf.json" "d['loss']")" "$(json "$out/eval_gpt2.json" "d['loss']")" ||
  fail "a run at lr 0 from the HF folder has another loss" "$out/eval_from_hf.json"

if train "$out/wide" "$out/wide.log" --set train.init="$hf" --set model.d_model=48; then fail "d_model 48 accepted"; fi
grep -qF "tensor '0.pos' (transformer.wpe.weight) has shape [64, 32] in the checkpoint, [64, 48] in the run's model" \
  "$out/wide.log" || fail "width mismatch message" "$out/wide.log"
if train "$out/heads" "$out/heads.log" --set train.init="$hf" --set model.n_heads=2; then fail "n_heads 2 accepted"; fi
grep -qF "the checkpoint's model has model.n_heads = 4, the run's model.n_heads = 2" "$out/heads.log" ||
  fail "head count message" "$out/heads.log"

llama=(--set model.norm=rms --set model.position=rope --set model.activation=swiglu --set model.bias=false
       --set model.kv_heads=2 --set model.tie_embeddings=false --set optim.lr=0.01)
train "$out/run_gpt2" "$out/run_gpt2.log" --set optim.lr=0.01 || fail "train gpt2 layout" "$out/run_gpt2.log"
train "$out/run_llama" "$out/run_llama.log" "${llama[@]}" || fail "train llama layout" "$out/run_llama.log"
train "$out/from_run" "$out/from_run.log" --set train.init="$out/run_gpt2" || fail "train.init = run" "$out/from_run.log"
for run in run_gpt2 run_llama from_run; do
  "$braid" eval "$out/$run" --tokens "$out/ids.json" --json >"$out/eval_$run.json" || fail "eval $run"
done
close "$(json "$out/eval_from_run.json" "d['loss']")" "$(json "$out/eval_run_gpt2.json" "d['loss']")" ||
  fail "a run at lr 0 from a braid run has another loss"
# A braid run as MODEL: one step's file, and generation with the tokenizer beside its shards.
"$braid" eval "$out/run_gpt2/ckpt-00000002.safetensors" --tokens "$out/ids.json" --json >"$out/eval_step.json" ||
  fail "eval of a checkpoint file"
[ "$(json "$out/eval_step.json" "d['loss']")" = "$(json "$out/eval_run_gpt2.json" "d['loss']")" ] ||
  fail "a run's folder and its step file differ" "$out/eval_step.json"
"$braid" generate "$out/run_gpt2" --prompt "Everyone is" --tokens 4 --json >"$out/gen_run.json" 2>"$out/gen_run.log" ||
  fail "generate from a braid run" "$out/gen_run.log"
[ "$(json "$out/gen_run.json" "d['prompt']")" = "Everyone is" ] || fail "a braid run's tokenizer" "$out/gen_run.json"

for run in run_gpt2 run_llama; do
  "$braid" export --hf "$out/hf_$run" "$out/$run" >"$out/export.log" 2>&1 || fail "export $run" "$out/export.log"
  cat "$out/export.log"
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -f "$out/hf_$run/$f" ] || fail "export $run lacks $f" "$out/export.log"
  done
  theirs=$(ref loss "$out/hf_$run" "$out/ids.json" 64 2>"$out/ref.log") || fail "transformers loads $run" "$out/ref.log"
  their_loss=$(python3 -c "import json, sys; print(json.loads(sys.argv[1])['loss'])" "$theirs")
  close "$(json "$out/eval_$run.json" "d['loss']")" "$their_loss" ||
    fail "$run exported: braid $(json "$out/eval_$run.json" "d['loss']"), transformers $their_loss"
done
grep -qF '"LlamaForCausalLM"' "$out/hf_run_llama/config.json" || fail "llama layout exported as LLaMA" "$out/hf_run_llama/config.json"
# The exported folder is complete: generate reads its tokenizer.
"$braid" generate "$out/hf_run_llama" --prompt "Everyone is" --tokens 4 --json >"$out/gen_exported.json" ||
  fail "generate from the exported folder"
[ "$(json "$out/gen_exported.json" "len(d['new_ids'])")" = 4 ] || fail "4 new ids" "$out/gen_exported.json"
echo "PASS"
