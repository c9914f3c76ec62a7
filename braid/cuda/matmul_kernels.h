// Device kernels beside the cuBLAS/cuDNN products: the bias gradients of
// linear and conv2d, a sum per channel.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// How many partial sums per channel channel_sum splits into: enough threads
// (~64k) to fill a GPU when channels are few (conv's db over n * oh * ow), no
// partial shorter than 64 elements.
int64_t channel_sum_chunks(int64_t outer, int64_t channels, int64_t inner);

// out[j] = sum over r < outer, s < inner of g[(r * channels + j) * inner + s]:
// g contiguous [outer, channels, inner] in `dtype` (f32, f64, f16, bf16), out
// [channels] in `dtype`. Sums run in float (double for f64) in two passes:
// chunk partials into `partial` (scratch of chunks * channels floats, doubles
// for f64), then their sum; deterministic, no atomics.
void channel_sum(DType dtype, void* out, const void* g, int64_t outer, int64_t channels, int64_t inner, void* partial,
                 int64_t chunks);

}  // namespace braid::cuda
