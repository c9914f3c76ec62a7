// Fashion-MNIST (Xiao et al. 2017): 28x28 grey images of clothing, 10 classes,
// 60k train / 10k test, read from the IDX files of Debian's
// `dataset-fashion-mnist` package.
//
// Example: input f32 [1, 28, 28] (pixels / 255, then (x - mean) / std when
// normalising), target i64 class in [0, 10).
#pragma once

#include <string>
#include <vector>

#include "braid/data/dataset.h"

namespace braid::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kFashionMnistPackage = "dataset-fashion-mnist";

struct FashionMnistOptions {
  std::string dir = kFashionMnistDir;
  bool train = true;       // train-* (60k) or t10k-* (10k) files
  bool normalize = true;   // subtract the training-set mean, divide by its std
  float mean = 0.2860f;    // of pixels / 255 over the 60k training images
  float std = 0.3530f;
};

class FashionMnist final : public Dataset {
 public:
  // Reads and validates both IDX files. A missing file throws IoError naming
  // the path and the Debian package to install.
  explicit FashionMnist(const FashionMnistOptions& options = {});

  int64_t size() const override { return n_; }
  ExampleSpec spec() const override { return {{1, 28, 28}, DType::f32, {}, DType::i64}; }
  void read(int64_t index, std::byte* input, std::byte* target) const override;

  static constexpr int64_t kClasses = 10;
  static constexpr int64_t kPixels = 28 * 28;
  const std::vector<uint8_t>& labels() const { return labels_; }

 private:
  int64_t n_ = 0;
  std::vector<uint8_t> pixels_;  // [n, 28, 28] raw bytes
  std::vector<uint8_t> labels_;  // [n]
  float scale_ = 1, shift_ = 0;  // input value = byte * scale_ + shift_ (scale and normalise at once)
};

}  // namespace braid::data
