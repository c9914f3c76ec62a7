// Synthetic images for sizes no installed data set has (224x224 ResNets) and
// for benchmarks that must not wait on a disk: every example is a pure
// function of (seed, index), computed when it is read, so a data set of any
// size costs no memory and every rank or worker sees the same examples.
//
// Example i: class c = uniform in [0, classes) (Philox stream (seed, 2i)),
// pixels = colour[c][channel] + noise, noise uniform with variance 1 (a
// bulk Philox draw, stream (seed, 2i + 1)), colour[c] a per-class, per-channel
// mean drawn from N(0, 1) (stream seed, counter c). A network learns the
// classes from the channel means, so a loss falls; nothing else about the
// images is meaningful.
#pragma once

#include <string_view>
#include <vector>

#include "braid/data/dataset.h"

namespace braid::data {

struct SyntheticImagesOptions {
  int64_t examples = 12800;
  Shape shape{3, 224, 224};  // [C, H, W] of one image
  int64_t classes = 1000;
  uint64_t seed = 0;
};

class SyntheticImages final : public Dataset {
 public:
  // ValueError for a shape that is not [C, H, W] with positive sizes, or
  // fewer than 1 example or class.
  explicit SyntheticImages(const SyntheticImagesOptions& options = {});

  int64_t size() const override { return o_.examples; }
  ExampleSpec spec() const override { return {o_.shape, DType::f32, {}, DType::i64}; }
  void read(int64_t index, std::byte* input, std::byte* target) const override;

 private:
  SyntheticImagesOptions o_;
  std::vector<float> colours_;  // [classes, C]
};

// "3x224x224" -> {3, 224, 224}; ValueError naming the text otherwise.
Shape parse_image_shape(std::string_view text);

}  // namespace braid::data
