// Training a byte-level BPE as Hugging Face's BpeTrainer does, so the same
// corpus and vocabulary size give the same merges and ids.
//
// The algorithm, and how it breaks ties:
//   - ids: the special tokens first, in the order given; then the 256 byte
//     tokens sorted by the code point of their byte-level character (so '!' is
//     the first byte token and 'Ġ' (' ') comes after 'ÿ'); then one id per merge
//     in the order merges are made.
//   - the corpus is read line by line, each line keeping its "\n" (as HF's
//     train(files) reads files), and each line is pre-tokenized alone; a piece's
//     count is how often it occurs. Special tokens in the text are not cut out.
//   - each step merges the pair of adjacent tokens with the largest count over
//     all pieces (count of the piece times occurrences in it). Among pairs of
//     equal count, the one whose (left id, right id) is smallest wins, comparing
//     left ids first: the order of HF's max-heap entries.
//   - counts are kept in a lazy max-heap: a popped pair whose count changed is
//     pushed back with its new count, and a merge in a piece updates the counts
//     of the pairs around it (a run "aaaa" merged by (a, a) gives "aa aa": the
//     pairs are counted as HF's Word::merge updates them).
//   - training stops when the vocabulary reaches vocab_size, or no pair occurs
//     min_frequency times (and at least once).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/text/bpe.h"

namespace braid::text {

struct TrainOptions {
  uint32_t vocab_size = 8192;  // including the 256 byte tokens and the special tokens
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  uint64_t min_frequency = 0;
  int threads = 0;  // counting pieces; 0: the pool as it is
};

// Trains on texts (each read line by line). ValueError when vocab_size is
// below 256 plus the special tokens.
Tokenizer train_bpe(std::span<const std::string_view> texts, const TrainOptions& o);

}  // namespace braid::text
