// Opening a dataset by name, as the `data.*` config keys describe it.
//
// fashion_mnist has its own train (60k) and test (10k) files. The single-file
// formats (csv, libsvm, text) and synthetic images are split in file order: the first 90% of the
// examples train, the last 10% are held out for evaluation (for text with
// overlapping windows, the two parts share at most `context` characters).
#pragma once

#include <memory>
#include <string>

#include "braid/data/dataset.h"
#include "braid/data/synthetic.h"

namespace braid::data {

struct OpenOptions {
  std::string name = "fashion_mnist";  // fashion_mnist | csv | libsvm | text | synthetic
  std::string path = "/usr/share/datasets/fashion-mnist";
  bool train = true;       // the training split, else the evaluation split
  bool normalize = true;   // fashion_mnist only
  int64_t context = 64;    // text only: tokens per example
  int64_t stride = 0;      // text only: bytes between window starts; 0 = context
  SyntheticImagesOptions synthetic{};  // synthetic only
};

inline constexpr double kTrainFraction = 0.9;

// ValueError for an unknown name; IoError from the readers.
std::shared_ptr<const Dataset> open_dataset(const OpenOptions& options);

// Examples [begin, end) of another dataset.
class Subset final : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end);
  int64_t size() const override { return end_ - begin_; }
  ExampleSpec spec() const override { return base_->spec(); }
  void read(int64_t index, std::byte* input, std::byte* target) const override {
    base_->read(begin_ + index, input, target);
  }
  const Dataset& base() const { return *base_; }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t begin_, end_;
};

}  // namespace braid::data
