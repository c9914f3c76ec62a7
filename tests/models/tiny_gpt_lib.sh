# The tiny gpt that the launch tests train (gpt_plans.sh, gpt_context.sh,
# gpt_context_netns.sh, gpt_sp_launch.sh, gpt_sp_netns.sh, gpt_recompute.sh, moe_plans.sh,
# tests/parallel/pipeline_schedules_launch.sh): shards of two fortune files
# under a 300-id tokenizer, the config, and the helpers that run it and
# compare held-out losses. Source it after setting $braid (the binary) and
# $out (the test's scratch folder).

# tiny_gpt_shards: the tokenizer in $out/tok, the shards in $out/shards.
tiny_gpt_shards() {
  local files=(/usr/share/games/fortunes/computers /usr/share/games/fortunes/science)
  "$braid" tokenize train --vocab-size 300 --out "$out/tok" "${files[@]}" >/dev/null
  "$braid" tokenize encode --tokenizer "$out/tok" --out "$out/shards/train" "${files[@]}" >/dev/null
}

# tiny_gpt_toml LAYERS [MODEL_LINE...]: $out/tiny.toml, 6 SGD steps (lr 0.5)
# of a GPT-2-layout model, 4 heads of width 8, 16 tokens a sequence, with the
# held-out loss after the last; MODEL_LINEs ("tie_embeddings = false") are
# added to [model].
tiny_gpt_toml() {
  local layers=$1; shift
  {
    printf '[train]\nbatch_size = 8\nmax_steps = 6\nlog_every = 3\neval_every = 6\neval_steps = 5\nthreads = 1\n'
    printf 'progress = "lines"\ndeterministic = true\n'
    printf '[model]\nname = "gpt"\nn_layers = %s\nn_heads = 4\nd_model = 32\ncontext = 16\n' "$layers"
    for line in "$@"; do printf '%s\n' "$line"; done
    printf '[optim]\nname = "sgd"\nlr = 0.5\nmomentum = 0.0\n'
    printf '[data]\nname = "tokens"\npath = "%s/shards/train-*.tok"\n' "$out"
  } >"$out/tiny.toml"
}

# run NAME PROCESSES KEY=VALUE...: braid train on $out/tiny.toml (under braid
# launch when PROCESSES > 1), its output in $out/NAME.log, its files in
# $out/NAME; returns the run's status.
run() {
  local name=$1 n=$2; shift 2
  local sets=() cmd
  for kv in "$@"; do sets+=(--set "$kv"); done
  cmd=("$braid" train "$out/tiny.toml" --set train.out_dir="$out/$name" "${sets[@]}")
  if [ "$n" -gt 1 ]; then cmd=("$braid" launch -n "$n" -- "${cmd[@]}"); fi
  timeout 300 "${cmd[@]}" >"$out/$name.log" 2>&1
}

# final_loss FILE: the first final held-out loss a run's output FILE prints.
final_loss() {
  grep -Eo "final test loss [0-9.]+" "$1" | head -1 | awk '{print $4}'
}

# loss NAME PROCESSES KEY=VALUE...: runs; prints rank 0's final held-out loss.
loss() {
  run "$@" || { cat "$out/$1.log" >&2; echo "FAIL: $1" >&2; exit 1; }
  final_loss "$out/$1.log"
}

# same NAME GOT WANT: the two losses equal as printed (4 decimals).
same() {
  if [ "$2" != "$3" ]; then echo "FAIL: $1: held-out loss $2, one process $3"; exit 1; fi
  echo "ok: $1: $2 (one process $3)"
}

# refused NAME EXPECTED PROCESSES KEY=VALUE...: the run fails, saying EXPECTED.
refused() {
  local name=$1 expected=$2; shift 2
  if run "$name" "$@"; then echo "FAIL: $name ran"; exit 1; fi
  grep -qF "$expected" "$out/$name.log" || { cat "$out/$name.log"; echo "FAIL: $name: no '$expected'"; exit 1; }
  echo "ok: $name refused: $(grep -oF "$expected" "$out/$name.log" | head -1)"
}
