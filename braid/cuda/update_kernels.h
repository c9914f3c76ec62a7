// Device kernels of the optimizer updates (braid/ops/update.cc), in place over
// contiguous tensors of n elements. The parameter is f32, f16 or bf16; the
// gradient and the state buffers each f32 or the parameter's dtype (16-bit
// parameters with f32 state, or all 16-bit). Every update computes in float,
// as the CPU kernel does for f32. lr (and Adam's step t) are read from the
// f64 `scalars` in device memory, so a step needs no host round trip.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

struct SgdConfig {
  float weight_decay, momentum, damp;  // damp = 1 - dampening
  bool first, nesterov;
};

// b = first ? d : mom * b + damp * d, d = g + wd * p; p -= lr * (nesterov ? d + mom * b : b);
// without a buffer (b null) p -= lr * (g + wd * p). scalars[0] = lr.
void sgd_update(DType p_dtype, DType g_dtype, DType b_dtype, void* p, const void* g, void* b, const double* scalars,
                int64_t n, const SgdConfig& c);

struct AdamConfig {
  double beta1, beta2, eps, weight_decay;
  bool decoupled;
};

// The CPU's Adam step (update.cc) with lr = scalars[0], t = scalars[1]; m and
// v of `state_dtype`. `derived` is 4 floats of device scratch: a one-thread
// kernel derives the step's float constants there first (in double, as the
// CPU does), so elements do not each evaluate pow().
void adam_update(DType p_dtype, DType g_dtype, DType state_dtype, void* p, const void* g, void* m, void* v,
                 const double* scalars, float* derived, int64_t n, const AdamConfig& c);

}  // namespace braid::cuda
