// 2-D pooling, as torch.nn.functional.max_pool2d / avg_pool2d (floor mode,
// no dilation).
#pragma once

#include <array>
#include <cstdint>

#include "braid/tensor/tensor.h"

namespace braid {

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};   // (h, w)
  std::array<int64_t, 2> stride{0, 0};   // (h, w); 0 = the kernel size (PyTorch's default)
  std::array<int64_t, 2> padding{0, 0};  // at most half the kernel, as in PyTorch
  bool count_include_pad = true;         // avg_pool2d only
};

// x [n, c, h, w] (or [c, h, w]) -> [n, c, (h + 2p - k) / s + 1, ...]. f32 and f64.
// max_pool2d keeps each window's argmax (i32, per output) for the backward
// pass instead of recomputing it.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});

}  // namespace braid
