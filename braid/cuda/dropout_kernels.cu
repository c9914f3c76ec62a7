#include "braid/cuda/dropout_kernels.h"

namespace braid::cuda {

namespace {

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
