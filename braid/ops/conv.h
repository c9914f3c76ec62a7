// 2-D convolution, as torch.nn.functional.conv2d.
#pragma once

#include <array>
#include <cstdint>

#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/tensor.h"

namespace braid {

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};    // (h, w)
  std::array<int64_t, 2> padding{0, 0};   // zeros on both sides, (h, w)
  std::array<int64_t, 2> dilation{1, 1};  // (h, w)
  int64_t groups = 1;
  // Which implementation runs (f32, bf16): the per-shape choice by default;
  // tests and benchmarks pin one. f64 always runs im2col + GEMM.
  cpu::ConvBackend backend = cpu::ConvBackend::automatic;
};

// x [n, c, h, w], w [o, c / groups, kh, kw], b [o] or undefined
//   -> y [n, o, (h + 2p - d(k-1) - 1) / s + 1, ...]. f32 and f64; inside an
// Autocast(bf16) region f32 inputs run bf16 products into f32 (autocast.h).
// Backward gives dx, dw and db (each only when required).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(),
              const Conv2dOptions& options = {});

}  // namespace braid
