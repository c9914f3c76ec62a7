// Token shards as a training dataset (data.name = tokens): example i is
// window i of context + 1 ids, input = its first `context` ids and target =
// its last `context` (the next token at each position), both i64 as the
// character-level text dataset gives them, so the same models train on either.
#pragma once

#include <string>

#include "braid/data/dataset.h"
#include "braid/text/shards.h"

namespace braid::text {

class TokenDataset final : public data::Dataset {
 public:
  // `pattern`: a glob of shard files (or one file). IoError from glob_shards and TokenShard.
  TokenDataset(const std::string& pattern, WindowOptions o);

  int64_t size() const override { return static_cast<int64_t>(windows_.size()); }
  data::ExampleSpec spec() const override;
  void read(int64_t index, std::byte* input, std::byte* target) const override;
  // One past the largest id any shard may hold (the largest header vocabulary).
  uint32_t vocab_size() const { return vocab_size_; }
  const TokenWindows& windows() const { return windows_; }

 private:
  WindowOptions o_;
  TokenWindows windows_;
  uint32_t vocab_size_ = 0;
};

}  // namespace braid::text
