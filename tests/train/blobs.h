// A small classification set for trainer tests: three Gaussian blobs in 4-D,
// one per class; deterministic.
#pragma once

#include <cstring>
#include <vector>

#include "braid/base/rng.h"
#include "braid/data/dataset.h"

namespace braid::train::testing {

class Blobs final : public data::Dataset {
 public:
  explicit Blobs(int64_t n, uint64_t seed) : n_(n) {
    Generator g(seed);
    for (int64_t i = 0; i < n * 4; ++i) x_.push_back(static_cast<float>(g.normal()) * 0.5f);
    for (int64_t i = 0; i < n; ++i) {
      y_.push_back(i % 3);
      x_[i * 4 + (i % 3)] += 2.0f;
    }
  }
  int64_t size() const override { return n_; }
  data::ExampleSpec spec() const override { return {{4}, DType::f32, {}, DType::i64}; }
  void read(int64_t i, std::byte* input, std::byte* target) const override {
    std::memcpy(input, &x_[i * 4], 16);
    std::memcpy(target, &y_[i], 8);
  }

 private:
  int64_t n_;
  std::vector<float> x_;
  std::vector<int64_t> y_;
};

}  // namespace braid::train::testing
