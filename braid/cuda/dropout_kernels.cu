#include "braid/cuda/dropout_kernels.h"

namespace braid::cuda {

namespace {

// rng.cc's constants: the Philox-4x32 multipliers and Weyl key increments.
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

struct Words {
  uint32_t w[4];
};

// braid::philox (rng.cc) as a host/device function: 4 words for (key, counter).
BRAID_HD inline Words philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0, p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// A thread per Philox block: its 4 words serve up to 4 consecutive elements
// (fewer at the ends, where the call's words start or stop mid-block).
template <class T>
struct DropoutBlocks {
  T* y;
  T* mask;
  const T* x;
  Indexer<1> ix;
  int64_t n;
  PhiloxState st;
  double p;
  compute_t<T> scale;  // 1 / (1 - p) rounded to T, as the mask holds it

  BRAID_HD void operator()(int64_t t) const {
    const uint64_t block = st.offset / 4 + static_cast<uint64_t>(t);
    const Words words = philox(st.seed, st.stream, block);
    for (int lane = 0; lane < 4; ++lane) {
      const uint64_t word = block * 4 + static_cast<uint64_t>(lane);
      if (word < st.offset || word - st.offset >= static_cast<uint64_t>(n)) continue;
      const int64_t i = static_cast<int64_t>(word - st.offset);
      const float u = static_cast<float>(words.w[lane] >> 8) * 0x1.0p-24f;  // as Generator::uniform()
      const compute_t<T> m = u >= p ? scale : compute_t<T>(0);
      int64_t off[1];
      ix.offsets(i, off);
      store<T>(mask + i, m);
      store<T>(y + i, load<T>(x + off[0]) * m);
    }
  }
};

}  // namespace

void dropout(DType dtype, void* y, void* mask, const void* x, const Indexer<1>& x_ix, int64_t n, PhiloxState state,
             double p) {
  if (n <= 0) return;
  const int64_t blocks = static_cast<int64_t>((state.offset + static_cast<uint64_t>(n) + 3) / 4 - state.offset / 4);
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      // The mask's value rounded to T first, so that y = x * mask exactly.
      T scale_t;
      store<T>(&scale_t, static_cast<compute_t<T>>(p < 1 ? 1.0 / (1.0 - p) : 0.0));
      const compute_t<T> scale = load<T>(&scale_t);
      for_each(blocks, DropoutBlocks<T>{static_cast<T*>(y), static_cast<T*>(mask), static_cast<const T*>(x), x_ix, n,
                                        state, p, scale}, "dropout");
    }
  });
}

}  // namespace braid::cuda
