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

// One parameter of a multi-tensor Adam step: its tensors (device memory) and
// elements.
struct AdamTensors {
  void* p;
  const void* g;
  void* m;
  void* v;
  int64_t n;
};

// Tensors per launch of the multi-tensor step: their pointers travel in the
// kernel's arguments (about 1.3 KB at 32, under CUDA's 4 KB), so nothing is
// copied to the device and a captured step replays them as they were.
inline constexpr int kAdamChunk = 32;

// adam_update over every tensor of `tensors` (all of these dtypes): the
// constants derived once into `derived`, then a launch per kAdamChunk
// tensors, each element updated by the same arithmetic as adam_update (bit
// for bit).
void adam_update_multi(DType p_dtype, DType g_dtype, DType state_dtype, const AdamTensors* tensors, int64_t count,
                       const double* scalars, float* derived, const AdamConfig& c);

// sum_squares_multi (braid/ops/update.h) over `count` f32 tensors: a thread
// per block of kSquaresBlock elements writes its float sum of squares to
// `partials` (one float per block of every tensor, in order; a launch per
// kAdamChunk tensors), then one thread sums the partials in double, in order,
// into *out: the CPU kernel's arithmetic, so the same bits.
inline constexpr int64_t kSquaresBlock = 1024;
// Blocks (partials) a tensor of n elements takes.
inline int64_t squares_blocks(int64_t n) { return (n + kSquaresBlock - 1) / kSquaresBlock; }
// x *= c over `count` f32 tensors in place, a launch per kAdamChunk tensors.
void scale_multi(float* const* tensors, const int64_t* sizes, int64_t count, float c);

void sum_squares_multi(const float* const* tensors, const int64_t* sizes, int64_t count, float* partials,
                       double* out);

}  // namespace braid::cuda
