// Device kernels of dropout: the mask drawn on the device from the same
// counter-based Philox-4x32-10 stream the CPU kernel reads (braid/base/rng.h),
// so a (seed, stream, offset) state gives the same keep decisions on either
// device: element i keeps when word offset + i, as a float in [0, 1), is >= p.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// A generator's state at the call (Generator::State).
struct PhiloxState {
  uint64_t seed, stream, offset;
};

// mask[i] = keep_i ? 1 / (1 - p) : 0 (in `dtype`, rounded), y[i] = x[ix(i)] *
// mask[i]; y and mask contiguous, n elements, x strided as `x_ix` says.
void dropout(DType dtype, void* y, void* mask, const void* x, const Indexer<1>& x_ix, int64_t n, PhiloxState state,
             double p);

}  // namespace braid::cuda
