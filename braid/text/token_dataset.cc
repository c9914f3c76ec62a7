#include "braid/text/token_dataset.h"

#include <vector>

namespace braid::text {

TokenDataset::TokenDataset(const std::string& pattern, WindowOptions o) : o_(o), windows_(glob_shards(pattern), o) {
  for (const auto& s : windows_.shards()) vocab_size_ = std::max(vocab_size_, s->vocab_size());
}

data::ExampleSpec TokenDataset::spec() const {
  const auto c = static_cast<int64_t>(o_.context);
  return {{c}, DType::i64, {c}, DType::i64};
}

void TokenDataset::read(int64_t index, std::byte* input, std::byte* target) const {
  data::check_index(index, size(), "tokens");
  thread_local std::vector<uint32_t> ids;
  ids.resize(o_.context + 1);
  windows_.window(static_cast<uint64_t>(index), ids);
  auto* x = reinterpret_cast<int64_t*>(input);
  auto* y = reinterpret_cast<int64_t*>(target);
  for (uint64_t i = 0; i < o_.context; ++i) {
    x[i] = ids[i];
    y[i] = ids[i + 1];
  }
}

}  // namespace braid::text
