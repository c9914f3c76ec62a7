// A character-level language-modelling dataset from any text file (e.g. the
// fortune cookies of Debian's `fortunes` package).
//
// Characters are bytes (UTF-8 sequences become several tokens); the
// vocabulary is the sorted set of bytes present in the file. Example i is the
// window starting at byte i * stride: input i64 [context] token ids, target
// i64 [context] the same window shifted by one (next-character targets).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "braid/data/dataset.h"

namespace braid::data {

struct TextOptions {
  int64_t context = 64;  // tokens per example
  int64_t stride = 1;    // bytes between the starts of consecutive examples
};

class CharTextDataset final : public Dataset {
 public:
  // Reads a file (gzip allowed); a folder reads every regular file in it, in
  // name order, concatenated, skipping symlinks and *.dat files (so the
  // fortunes folder reads each cookie file once, without strfile indexes).
  CharTextDataset(const std::string& path, const TextOptions& options = {});
  // From text in memory (tests, generated corpora).
  static CharTextDataset from_string(std::string text, const TextOptions& options, const std::string& name = "<text>");

  int64_t size() const override { return size_; }
  ExampleSpec spec() const override;
  void read(int64_t index, std::byte* input, std::byte* target) const override;

  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  // Token id -> byte, and back (-1 for bytes not in the vocabulary).
  const std::vector<uint8_t>& vocab() const { return vocab_; }
  int64_t token(uint8_t byte) const { return token_of_[byte]; }
  std::string decode(const std::vector<int64_t>& tokens) const;
  std::vector<int64_t> encode(const std::string& text) const;

 private:
  CharTextDataset(std::vector<uint8_t> bytes, const TextOptions& options, const std::string& name);
  TextOptions o_;
  std::vector<uint8_t> tokens_;  // the corpus as token ids
  std::vector<uint8_t> vocab_;
  std::array<int64_t, 256> token_of_{};
  int64_t size_ = 0;
};

}  // namespace braid::data
