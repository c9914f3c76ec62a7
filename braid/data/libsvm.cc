#include "braid/data/libsvm.h"

#include <algorithm>
#include <cstring>

#include "braid/data/file_bytes.h"
#include "braid/data/text_parse.h"

namespace braid::data {

LibsvmDataset::LibsvmDataset(const std::string& path, const LibsvmOptions& o) : o_(o) {
  std::vector<std::byte> bytes = read_maybe_gzip(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  int64_t line_no = 0, max_index = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    line = line.substr(0, line.find('#'));
    size_t at = 0;
    auto next_token = [&](std::string_view& tok) {
      at = line.find_first_not_of(" \t\r", at);
      if (at == std::string_view::npos) return false;
      size_t end = line.find_first_of(" \t\r", at);
      tok = line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
      return true;
    };
    std::string_view tok;
    if (!next_token(tok)) continue;  // blank or comment line
    labels_.push_back(parse_float(tok, {&path, line_no, static_cast<int64_t>(at) + 1}, "a numeric label"));
    at += tok.size();
    int64_t prev = 0;
    while (next_token(tok)) {
      const int64_t col = static_cast<int64_t>(at) + 1;
      size_t colon = tok.find(':');
      if (colon == std::string_view::npos) {
        fail<IoError>("{}:{}:{}: expected <index>:<value>, found '{}'", path, line_no, col, tok);
      }
      int64_t index = parse_int(tok.substr(0, colon), {&path, line_no, col}, "a feature index");
      if (index < 1 || index > INT32_MAX) {
        fail<IoError>("{}:{}:{}: feature index {} outside [1, {}]", path, line_no, col, index, INT32_MAX);
      }
      if (index <= prev) {
        fail<IoError>("{}:{}:{}: feature index {} after {}: indices must increase", path, line_no, col, index, prev);
      }
      float value = parse_float(tok.substr(colon + 1),
                                {&path, line_no, col + static_cast<int64_t>(colon) + 1}, "a feature value");
      indices_.push_back(static_cast<int32_t>(index - 1));
      values_.push_back(value);
      prev = index;
      max_index = std::max(max_index, index);
      at += tok.size();
    }
    row_start_.push_back(static_cast<int64_t>(values_.size()));
  }
  if (labels_.empty()) fail<IoError>("{}: no examples", path);
  features_ = o.features > 0 ? o.features : max_index;
  if (max_index > features_) {
    fail<IoError>("{}: feature index {} exceeds the configured {} features", path, max_index, features_);
  }
  classes_ = labels_;
  std::sort(classes_.begin(), classes_.end());
  classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
  for (float l : labels_) {
    class_ids_.push_back(std::lower_bound(classes_.begin(), classes_.end(), l) - classes_.begin());
  }
}

ExampleSpec LibsvmDataset::spec() const {
  return {{features_}, DType::f32, {}, o_.class_targets ? DType::i64 : DType::f32};
}

LibsvmDataset::Row LibsvmDataset::row(int64_t index) const {
  check_index(index, size(), "LibsvmDataset::row");
  auto begin = static_cast<size_t>(row_start_[index]);
  auto count = static_cast<size_t>(row_start_[index + 1]) - begin;
  return {{indices_.data() + begin, count}, {values_.data() + begin, count}, labels_[index]};
}

void LibsvmDataset::read(int64_t index, std::byte* input, std::byte* target) const {
  auto* x = reinterpret_cast<float*>(input);
  std::fill(x, x + features_, 0.0f);
  for (int64_t k = row_start_[index]; k < row_start_[index + 1]; ++k) x[indices_[k]] = values_[k];
  if (o_.class_targets) {
    std::memcpy(target, &class_ids_[index], sizeof(int64_t));
  } else {
    std::memcpy(target, &labels_[index], sizeof(float));
  }
}

}  // namespace braid::data
