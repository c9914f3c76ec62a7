// Reading and writing byte-level BPE tokenizers in the two common layouts:
//   - GPT-2's pair: vocab.json ({"token": id, ...}, tokens in byte-level
//     spelling) and merges.txt ("#version: 0.2", then one "left right" per
//     line, highest priority first). It carries no added tokens.
//   - Hugging Face's tokenizer.json: the same vocabulary and merges under
//     "model" (merges as "left right" strings or, since tokenizers 0.20, as
//     [left, right] pairs), added tokens, and the pipeline around the model.
// braid implements the byte-level pipeline: no normalizer, a ByteLevel
// pre-tokenizer (GPT-2 pattern), a BPE model without dropout, subword
// prefixes or byte fallback, a ByteLevel (or no) decoder and post-processor.
// Anything else is refused by name rather than encoded differently.
#pragma once

#include <string>

#include "braid/text/bpe.h"

namespace braid::text {

// A tokenizer.json file, or a folder holding tokenizer.json or else
// vocab.json + merges.txt. IoError naming the file for a missing, unreadable
// or malformed file; ValueError naming the file and the part braid does not
// implement.
Tokenizer load_tokenizer(const std::string& path);
Tokenizer load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt);
Tokenizer load_tokenizer_json(const std::string& path);

// Writes vocab.json, merges.txt and tokenizer.json into `dir` (created if
// missing), each replaced atomically.
void save_tokenizer(const Tokenizer& t, const std::string& dir);
std::string to_vocab_json(const Tokenizer& t);
std::string to_merges_txt(const Tokenizer& t);
std::string to_tokenizer_json(const Tokenizer& t);

}  // namespace braid::text
