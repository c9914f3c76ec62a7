// Per-example input transforms (augmentation), applied by the loader in place
// on an example's f32 input right after the dataset writes it.
//
// Each example gets its own Philox generator keyed by (loader seed, epoch,
// position in the epoch), so augmentation is identical whatever the number of
// loader threads or the batch size.
#pragma once

#include <memory>
#include <vector>

#include "braid/base/rng.h"
#include "braid/tensor/shape.h"

namespace braid::data {

class Transform {
 public:
  virtual ~Transform() = default;
  // `x` holds numel(shape) floats of one example ([C, H, W] for images).
  virtual void apply(float* x, const Shape& shape, Generator& rng) const = 0;
};

// x = (x - mean[c]) / std[c] per channel c of [C, ...] (one value: all channels).
class Normalize final : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  void apply(float* x, const Shape& shape, Generator& rng) const override;

 private:
  std::vector<float> mean_, inv_std_;
};

// Pads [C, H, W] by `padding` pixels of `fill` on every side and takes a
// uniformly placed H x W crop (the CIFAR/MNIST "random crop with padding").
class RandomCrop final : public Transform {
 public:
  explicit RandomCrop(int64_t padding, float fill = 0.0f);
  void apply(float* x, const Shape& shape, Generator& rng) const override;

 private:
  int64_t padding_;
  float fill_;
};

// Mirrors [C, H, W] left-right with probability p.
class HorizontalFlip final : public Transform {
 public:
  explicit HorizontalFlip(float p = 0.5f);
  void apply(float* x, const Shape& shape, Generator& rng) const override;

 private:
  float p_;
};

using Transforms = std::vector<std::shared_ptr<const Transform>>;

}  // namespace braid::data
