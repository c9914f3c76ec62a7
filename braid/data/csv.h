// Numeric CSV: one example per line, comma-separated numbers, one column of
// which is the label. An optional first line of column names is detected
// (its label field is not a number) and skipped. Blank lines are skipped.
//
// Example: input f32 [columns - 1]; target i64 class (or f32 for regression).
#pragma once

#include <string>
#include <vector>

#include "braid/data/dataset.h"

namespace braid::data {

struct CsvOptions {
  int64_t label_column = -1;  // 0-based; negative counts from the end (-1 = last)
  bool regression = false;    // target f32 value instead of an i64 class
  char delimiter = ',';
};

class CsvDataset final : public Dataset {
 public:
  // Reads the whole file (gzip allowed). Errors name path:line:column.
  CsvDataset(const std::string& path, const CsvOptions& options = {});

  int64_t size() const override { return n_; }
  ExampleSpec spec() const override;
  void read(int64_t index, std::byte* input, std::byte* target) const override;
  int64_t features() const { return features_; }

 private:
  CsvOptions o_;
  int64_t n_ = 0, features_ = 0;
  std::vector<float> x_;        // [n, features]
  std::vector<double> labels_;  // [n]
};

}  // namespace braid::data
