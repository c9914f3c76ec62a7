// The libsvm / svmlight sparse format: one example per line,
//   <label> <index>:<value> <index>:<value> ...   # optional comment
// with 1-based, strictly increasing feature indices.
//
// Rows are kept sparse (CSR) for linear models (row()); the Dataset interface
// gives dense rows: input f32 [features], target f32 raw label, or i64 class
// when class_targets maps the sorted distinct labels to 0..K-1 (so -1/+1 and
// 1..K files both train with cross-entropy).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/data/dataset.h"

namespace braid::data {

struct LibsvmOptions {
  int64_t features = 0;        // 0: the largest index in the file
  bool class_targets = false;  // i64 class ids instead of raw f32 labels
};

class LibsvmDataset final : public Dataset {
 public:
  // Reads the whole file (gzip allowed). Errors name path:line:column.
  LibsvmDataset(const std::string& path, const LibsvmOptions& options = {});

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  ExampleSpec spec() const override;
  void read(int64_t index, std::byte* input, std::byte* target) const override;

  int64_t features() const { return features_; }
  struct Row {
    std::span<const int32_t> indices;  // 0-based, increasing
    std::span<const float> values;
    float label;
  };
  Row row(int64_t index) const;
  // Distinct labels, sorted; class id k stands for classes()[k].
  const std::vector<float>& classes() const { return classes_; }
  int64_t nonzeros() const { return static_cast<int64_t>(values_.size()); }

 private:
  LibsvmOptions o_;
  int64_t features_ = 0;
  std::vector<int64_t> row_start_{0};  // CSR offsets, size n + 1
  std::vector<int32_t> indices_;
  std::vector<float> values_;
  std::vector<float> labels_;
  std::vector<float> classes_;
  std::vector<int64_t> class_ids_;
};

}  // namespace braid::data
