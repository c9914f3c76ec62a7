// Device kernels of the pool family (braid/ops/pool.cc): 2-D max and average
// pooling over planes (n * c) of [h, w], same windows, tie and NaN rules as the
// CPU kernels (braid/tensor/cpu/pool.cc). Our own rather than cuDNN's: the ops
// save each window's argmax for the backward (cuDNN pooling keeps no indices
// and wants x and y back), and the backward kernels gather per input element
// in the CPU's summation order (one thread per dx element, no atomics), so
// f32 results match the CPU bit for bit.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

struct PoolShape {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w;
};

// y = max over each window, idx = its argmax as iy * w + ix in its plane.
void max_pool2d(DType dtype, void* y, int32_t* idx, const void* x, const PoolShape& s);
// dx[plane][i] = sum of dy over the outputs whose idx is i.
void max_pool2d_backward(DType dtype, void* dx, const void* dy, const int32_t* idx, const PoolShape& s);
// y = window sum / (kh * kw, or the cells inside the input without count_include_pad).
void avg_pool2d(DType dtype, void* y, const void* x, const PoolShape& s, bool count_include_pad);
void avg_pool2d_backward(DType dtype, void* dx, const void* dy, const PoolShape& s, bool count_include_pad);

}  // namespace braid::cuda
