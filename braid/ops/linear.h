// The dense layer, as torch.nn.functional.linear: y = x w^T + b.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// x [..., in], w [out, in], b [out] or undefined -> y [..., out].
// One GEMM forward (bias pre-filled into y, then beta = 1), two backward
// (dx = g w, dw = g^T x) plus a column sum for db. f32 and f64; inside an
// Autocast(bf16) region f32 inputs run bf16 products into f32 (autocast.h).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

}  // namespace braid
