// Small tensors with known values, for tests that check where each element lands.
#pragma once

#include <vector>

#include "braid/ops/shape.h"
#include "braid/tensor/tensor.h"

namespace braid::test {

// start, start + 1, ... in row-major order.
inline Tensor iota(const Shape& shape, float start) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from_vector(v, shape);
}

// Elements [b, e) of `dim`, as a tensor of its own.
inline Tensor cut(const Tensor& t, int dim, int64_t b, int64_t e) { return slice(t, dim, b, e).contiguous(); }

}  // namespace braid::test
