#include "braid/cuda/matmul_kernels.h"

namespace braid::cuda {

namespace {

template <class T>
using Sum = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Thread i sums chunk i / channels of channel i % channels: neighbouring
// threads read neighbouring channels (coalesced when inner is 1, as in linear).
template <class T>
struct PartialSums {
  const T* g;
  Sum<T>* partial;
  int64_t channels, inner, total, len;  // total = outer * inner per channel, len per chunk
  BRAID_HD void operator()(int64_t i) const {
    const int64_t p = i / channels, j = i % channels;
    const int64_t lo = p * len, hi = lo + len < total ? lo + len : total;
    Sum<T> s = 0;
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t r = q / inner, t = q % inner;
      s += static_cast<Sum<T>>(load<T>(g + (r * channels + j) * inner + t));
    }
    partial[i] = s;
  }
};

template <class T>
struct ChunkSums {
  T* out;
  const Sum<T>* partial;
  int64_t channels, chunks;
  BRAID_HD void operator()(int64_t j) const {
    Sum<T> s = 0;
    for (int64_t p = 0; p < chunks; ++p) s += partial[p * channels + j];
    store<T>(out + j, static_cast<compute_t<T>>(s));
  }
};

}  // namespace

int64_t channel_sum_chunks(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t total = outer * inner;
  const int64_t by_threads = (int64_t{1} << 16) / std::max<int64_t>(1, channels);
  const int64_t by_length = (total + 63) / 64;
  return std::max<int64_t>(1, std::min(by_threads, by_length));
}

void channel_sum(DType dtype, void* out, const void* g, int64_t outer, int64_t channels, int64_t inner, void* partial,
                 int64_t chunks) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const int64_t total = outer * inner, len = (total + chunks - 1) / chunks;
      for_each(chunks * channels,
               PartialSums<T>{static_cast<const T*>(g), static_cast<Sum<T>*>(partial), channels, std::max<int64_t>(1, inner),
                              total, len},
               "channel_sum");
      for_each(channels, ChunkSums<T>{static_cast<T*>(out), static_cast<const Sum<T>*>(partial), channels, chunks},
               "channel_sum");
    }
  });
}

}  // namespace braid::cuda
