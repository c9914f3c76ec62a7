#include "braid/tensor/cpu/cast.h"

#include <cstring>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/loops.h"

namespace braid::cpu {
namespace {

// Branch-free, so GCC if-converts the NaN select and vectorises the loop.
void narrow(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, in + i, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void widen(const uint16_t* __restrict in, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &u, 4);
  }
}

}  // namespace

// bf16 is a struct holding its bits; the loops see the bits.
static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2);

void cast_f32_to_bf16(const float* in, bf16* out, int64_t n) {
  auto* bits = reinterpret_cast<uint16_t*>(out);
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) { narrow(in + lo, bits + lo, hi - lo); });
}

void cast_bf16_to_f32(const bf16* in, float* out, int64_t n) {
  const auto* bits = reinterpret_cast<const uint16_t*>(in);
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) { widen(bits + lo, out + lo, hi - lo); });
}

}  // namespace braid::cpu
