// Device kernels of dropout: the mask drawn on the device from the same
// counter-based Philox-4x32-10 stream the CPU kernel reads (braid/base/rng.h),
// so a (seed, stream, offset) state gives the same keep decisions on either
// device: element i keeps when word offset + i, as a float in [0, 1), is >= p.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// rng.cc's constants: the Philox-4x32 multipliers and Weyl key increments.
inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

struct Words {
  uint32_t w[4];
};

// braid::philox (rng.cc) as a host/device function: 4 words for (key,
// counter). Also the attention kernels' dropout (attention_kernels.cu).
BRAID_HD inline Words philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMul0) * c0, p1 = static_cast<uint64_t>(kPhiloxMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// A generator's state at the call (Generator::State).
struct PhiloxState {
  uint64_t seed, stream, offset;
};

// mask[i] = keep_i ? 1 / (1 - p) : 0 (in `dtype`, rounded), y[i] = x[ix(i)] *
// mask[i]; y and mask contiguous, n elements, x strided as `x_ix` says.
void dropout(DType dtype, void* y, void* mask, const void* x, const Indexer<1>& x_ix, int64_t n, PhiloxState state,
             double p);

}  // namespace braid::cuda
