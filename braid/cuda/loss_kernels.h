// Device kernels of the loss family. The means are one reduction over all
// rows or elements (reduce_loop.h: a block, or two stages through scratch
// for long ones); the backwards are maps that read the 0-d gradient from
// device memory, so no call waits for the device. f16/bf16 and f32 compute
// in float, f64 in double; every tensor here is contiguous.
#pragma once

#include "braid/cuda/reduce_loop.h"

namespace braid::cuda {

// Device scratch bytes a mean over n terms needs (0 or kReduceScratchBytes).
inline size_t mean_scratch_bytes(int64_t n) {
  return reduce_shape(1, n, true) == ReduceShape::two_stage ? kReduceScratchBytes : 0;
}

// out (0-d) = -mean_i logp[i, targets[i]]; logp [n, c], targets i64 [n]
// (one out of range adds 0: its check raises at the next sync).
void pick_mean(DType dtype, void* out, const void* logp, const int64_t* targets, int64_t n, int64_t c, void* scratch);

// out (0-d) = mean of max(x, 0) - x y + log(1 + exp(-|x|)) over n elements.
void bce_mean(DType dtype, void* out, const void* x, const void* y, int64_t n, void* scratch);

// gx = (exp(logp) - onehot(targets)) * g / n; g 0-d, all of `dtype`.
void cross_entropy_grad(DType dtype, void* gx, const void* g, const void* logp, const int64_t* targets, int64_t n,
                        int64_t c);

// gx = (sigmoid(x) - y) * g / n over n elements; g 0-d.
void bce_grad(DType dtype, void* gx, const void* g, const void* x, const void* y, int64_t n);

}  // namespace braid::cuda
