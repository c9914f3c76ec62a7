#include "braid/base/rng.h"

#include <cmath>

namespace braid {

namespace {
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline uint32_t mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *lo = static_cast<uint32_t>(p);
  return static_cast<uint32_t>(p >> 32);
}
}  // namespace

Philox4 philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  Philox4 c{static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
            static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t lo0, lo1;
    uint32_t hi0 = mulhi(kMul0, c[0], &lo0);
    uint32_t hi1 = mulhi(kMul1, c[2], &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

void philox_fill(uint64_t key, uint64_t counter_hi, uint64_t first_word, std::span<uint32_t> out) {
  // The words before the first whole block and after the last lane group
  // come from a Generator, which computes each block once for its words.
  Generator edge(key, counter_hi);
  edge.set_state({key, counter_hi, first_word});
  size_t j = 0;
  uint64_t w = first_word;
  for (; j < out.size() && w % 4 != 0; ++j, ++w) out[j] = edge.next_u32();
  // kLanes whole blocks at a time, one array per Philox word: the same rounds
  // as philox() above, in lanes.
  constexpr size_t kLanes = 32;
  const auto hi0 = static_cast<uint32_t>(counter_hi), hi1 = static_cast<uint32_t>(counter_hi >> 32);
  while (out.size() - j >= 4 * kLanes) {
    const uint64_t block = w / 4;
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (size_t l = 0; l < kLanes; ++l) {
      c0[l] = static_cast<uint32_t>(block + l), c1[l] = static_cast<uint32_t>((block + l) >> 32);
      c2[l] = hi0, c3[l] = hi1;
    }
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      for (size_t l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0[l], p1 = static_cast<uint64_t>(kMul1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1), c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0, c2[l] = n2;
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    for (size_t l = 0; l < kLanes; ++l) {
      out[j + 4 * l] = c0[l], out[j + 4 * l + 1] = c1[l], out[j + 4 * l + 2] = c2[l], out[j + 4 * l + 3] = c3[l];
    }
    j += 4 * kLanes, w += 4 * kLanes;
  }
  edge.set_state({key, counter_hi, w});
  for (; j < out.size(); ++j) out[j] = edge.next_u32();
}

uint32_t Generator::next_u32() {
  if (offset_ / 4 != block_at_) {
    block_at_ = offset_ / 4;
    block_ = philox(seed_, stream_, block_at_);
  }
  return block_[offset_++ % 4];
}

uint64_t Generator::next_u64() {
  uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

float Generator::uniform() { return static_cast<float>(next_u32() >> 8) * 0x1.0p-24f; }

double Generator::uniform_f64() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  double u1 = 1.0 - uniform_f64();  // (0, 1]
  double u2 = uniform_f64();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling removes modulo bias: x is redrawn at or past limit =
  // UINT64_MAX - UINT64_MAX % n. That limit is above UINT64_MAX - n, so a draw
  // below that (almost all, for any n a shuffle meets) is taken without the
  // division limit costs.
  uint64_t x;
  while (true) {
    x = next_u64();
    if (x <= UINT64_MAX - n || x < UINT64_MAX - UINT64_MAX % n) break;
  }
  return x % n;
}

}  // namespace braid
