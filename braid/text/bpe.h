// A byte-level BPE tokenizer (GPT-2, RoBERTa, and any Hugging Face `tokenizers`
// model with a ByteLevel pre-tokenizer and a BPE model): text -> ids -> bytes.
//
// Encoding, as Hugging Face does it, so ids are identical:
//   1. ill-formed UTF-8 becomes U+FFFD (as Python's errors="replace" reads it);
//   2. added tokens (such as "<|endoftext|>") are cut out, leftmost and longest
//      first, and become their ids;
//   3. each remaining segment (with a ' ' in front when add_prefix_space and it
//      does not start with one) is split by the GPT-2 pre-tokenizer;
//   4. each piece's bytes become the ids of their byte tokens, and merges are
//      applied lowest rank first, leftmost first among equal ranks (a heap over
//      the piece's adjacent pairs, so an odd merges file gives HF's ids too).
// A document is cut at safe points (is_safe_cut) into parts encoded in
// parallel on the base thread pool, and each thread keeps a cache from piece
// bytes to ids, so the BPE of a frequent word runs once per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace braid::text {

// A token matched on the raw text before pre-tokenization.
struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = true;  // dropped by decode's skip_special
};

struct TokenizerOptions {
  // Put a ' ' before each segment that does not start with one (RoBERTa-style).
  bool add_prefix_space = false;
  // A piece that is a vocabulary token as a whole becomes that token without
  // merging (Hugging Face's BPE `ignore_merges`, as Llama 3 uses).
  bool ignore_merges = false;
};

struct EncodeOptions {
  int threads = 0;  // 0: the pool as it is
};

struct DecodeOptions {
  bool skip_special = false;
};

class Tokenizer {
 public:
  // vocab[id] is the byte-level spelling of token `id` (empty: no such id);
  // merges are (left, right) spellings in rank order; an added token may share
  // its id with a vocabulary token. ValueError for a merge naming a token
  // missing from `vocab` (or whose concatenation is missing), by line number.
  Tokenizer(std::vector<std::string> vocab, std::vector<std::pair<std::string, std::string>> merges,
            std::vector<AddedToken> added = {}, TokenizerOptions options = {});

  std::vector<uint32_t> encode(std::string_view text, const EncodeOptions& o = {}) const;
  // Each document encoded as encode() does; parallel over documents and over
  // the parts of long ones.
  std::vector<std::vector<uint32_t>> encode_batch(std::span<const std::string_view> docs,
                                                  const EncodeOptions& o = {}) const;
  // The bytes the ids spell. IndexError naming the first id outside the vocabulary.
  std::string decode(std::span<const uint32_t> ids, const DecodeOptions& o = {}) const;

  // One past the largest id (ids of a shard must be below it).
  uint32_t vocab_size() const { return static_cast<uint32_t>(id_to_token_.size()); }
  // The id of an added token's content, else of a vocabulary token's byte-level spelling.
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // The spelling of `id` (an added token's content, else the byte-level token).
  const std::string& id_to_token(uint32_t id) const;

  const std::vector<std::string>& vocab() const { return vocab_; }
  const std::vector<std::pair<std::string, std::string>>& merges() const { return merge_list_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const TokenizerOptions& options() const { return options_; }

  struct Cache;  // piece bytes -> ids, one per thread (bpe.cc)
  struct Part {  // a stretch of one document: text to encode, or one added token
    size_t doc, begin, end;
    int64_t added_id;  // -1: text
    bool prefix_space;
  };

 private:
  void encode_piece(std::string_view piece, Cache& cache, std::vector<uint32_t>* out) const;
  void encode_segment(std::string_view text, bool prefix_space, Cache& cache, std::vector<uint32_t>* out) const;
  void bpe(std::string_view piece, std::vector<uint32_t>* out) const;
  void split_added(size_t doc, std::string_view text, size_t target, std::vector<Part>* parts) const;

  struct MergeRule {
    uint32_t rank, id;
  };
  std::vector<std::string> vocab_;
  std::vector<std::pair<std::string, std::string>> merge_list_;
  std::vector<AddedToken> added_;
  TokenizerOptions options_;

  std::unordered_map<std::string, uint32_t> token_ids_;  // byte-level spelling -> id
  std::unordered_map<std::string, uint32_t> added_ids_;  // content -> id
  std::vector<std::string> id_to_token_;
  std::vector<std::string> id_bytes_;  // what decode writes for each id
  std::vector<bool> id_special_;
  std::unordered_map<uint64_t, MergeRule> merge_rules_;  // (left << 32 | right) -> rank, result
  int32_t byte_ids_[256];                                // the id of each byte's token, -1 if none
  std::vector<uint32_t> added_by_first_byte_[256];  // indices into added_, longest first
};

}  // namespace braid::text
