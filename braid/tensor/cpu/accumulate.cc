#include "braid/tensor/cpu/accumulate.h"

#include "braid/tensor/cpu/loops.h"

namespace braid::cpu {

namespace {
template <class T>
inline T add(T a, T b) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
}  // namespace

void add_into(const Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
    fail<ValueError>("add_into: {} {} += {} {}", name(dst.dtype()), to_string(dst.shape()), name(src.dtype()),
                     to_string(src.shape()));
  }
  visit_dtype(dst.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      fail<ValueError>("add_into: bool tensors cannot be accumulated");
    } else {
      T* d = static_cast<T*>(dst.storage()->data());
      const T* s = static_cast<const T*>(src.storage()->data());
      strided_loop<2>(dst.shape(), {dst.strides(), src.strides()}, {dst.offset(), src.offset()},
                      [&](std::array<int64_t, 2> off, int64_t n, std::array<int64_t, 2> st) {
                        T* dp = d + off[0];
                        const T* sp = s + off[1];
                        if (st[0] == 1 && st[1] == 1) {
                          for (int64_t i = 0; i < n; ++i) dp[i] = add(dp[i], sp[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = add(dp[i * st[0]], sp[i * st[1]]);
                        }
                      });
    }
  });
}

}  // namespace braid::cpu
