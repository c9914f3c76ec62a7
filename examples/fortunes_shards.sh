#!/usr/bin/env bash
# The corpus of examples/configs/gpt_small.toml: every English fortune file of
# Debian's `fortunes` package (2.5 MB; scripts/setup installs it), a byte-level
# BPE tokenizer of 4096 ids trained on them, and the files encoded into token
# shards (each file one document, <|endoftext|> after each).
#
#   examples/fortunes_shards.sh [OUT=runs/fortunes] [BRAID=build/bin/braid]
#
# OUT holds tokenizer.json, vocab.json and merges.txt and the shard
# OUT/train-00000.tok: the tokenizer sits next to the shards, where `braid
# generate` looks for a run's tokenizer (the folder of its data.path). `braid train` holds out the last 10% of its windows for evaluation.
set -euo pipefail
out=${1:-runs/fortunes}
braid=${2:-build/bin/braid}
files=()
for f in /usr/share/games/fortunes/*; do
  case "$f" in *.dat | *.u8) continue ;; esac
  [[ -f "$f" ]] && files+=("$f")
done
if ((${#files[@]} == 0)); then
  echo "fortunes_shards: no fortune files in /usr/share/games/fortunes (run scripts/setup)" >&2
  exit 1
fi
"$braid" tokenize train --vocab-size 4096 --out "$out" "${files[@]}"
"$braid" tokenize encode --tokenizer "$out" --out "$out/train" "${files[@]}"
