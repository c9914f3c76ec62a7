#include "braid/cuda/pool_kernels.h"

namespace braid::cuda {

namespace {

// Output (oy, ox)'s window clipped to the input: rows [y0, y1), columns [x0, x1).
struct Window {
  int64_t y0, y1, x0, x1;
};
BRAID_HD inline Window window(const PoolShape& s, int64_t oy, int64_t ox) {
  const int64_t ys = oy * s.stride_h - s.pad_h, xs = ox * s.stride_w - s.pad_w;
  return {ys > 0 ? ys : 0, ys + s.kh < s.h ? ys + s.kh : s.h, xs > 0 ? xs : 0, xs + s.kw < s.w ? xs + s.kw : s.w};
}

// The outputs along one axis whose windows hold input coordinate i:
// o * stride - pad <= i < o * stride - pad + k, within [0, out).
BRAID_HD inline void covering(int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t out, int64_t& lo,
                              int64_t& hi) {
  const int64_t first = i + pad - k + 1;
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = (i + pad) / stride + 1;
  if (hi > out) hi = out;
}

template <class C>
BRAID_HD inline C divisor(const PoolShape& s, const Window& win, bool include_pad) {
  return include_pad ? C(s.kh * s.kw) : C((win.y1 - win.y0) * (win.x1 - win.x0));
}

template <class T>
struct MaxForward {
  PoolShape s;
  T* y;
  int32_t* idx;
  const T* x;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh, plane = i / (s.ow * s.oh);
    const T* xp = x + plane * s.h * s.w;
    const Window win = window(s, oy, ox);
    int64_t at = win.y0 * s.w + win.x0;
    compute_t<T> best = load<T>(xp + at);
    for (int64_t iy = win.y0; iy < win.y1; ++iy)
      for (int64_t ix = win.x0; ix < win.x1; ++ix) {
        const compute_t<T> v = load<T>(xp + iy * s.w + ix);
        if (v > best || v != v) {  // NaN wins, as in PyTorch
          best = v;
          at = iy * s.w + ix;
        }
      }
    store<T>(y + i, best);
    idx[i] = static_cast<int32_t>(at);
  }
};

template <class T>
struct MaxBackward {
  PoolShape s;
  T* dx;
  const T* dy;
  const int32_t* idx;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t ix = i % s.w, iy = (i / s.w) % s.h, plane = i / (s.w * s.h);
    const int64_t base = plane * s.oh * s.ow, self = iy * s.w + ix;
    int64_t y0, y1, x0, x1;
    covering(iy, s.kh, s.stride_h, s.pad_h, s.oh, y0, y1);
    covering(ix, s.kw, s.stride_w, s.pad_w, s.ow, x0, x1);
    compute_t<T> acc = 0;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = x0; ox < x1; ++ox) {
        const int64_t o = base + oy * s.ow + ox;
        if (idx[o] == self) acc += load<T>(dy + o);
      }
    store<T>(dx + i, acc);
  }
};

template <class T>
struct AvgForward {
  PoolShape s;
  T* y;
  const T* x;
  bool include_pad;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh, plane = i / (s.ow * s.oh);
    const T* xp = x + plane * s.h * s.w;
    const Window win = window(s, oy, ox);
    compute_t<T> sum = 0;
    for (int64_t iy = win.y0; iy < win.y1; ++iy)
      for (int64_t ix = win.x0; ix < win.x1; ++ix) sum += load<T>(xp + iy * s.w + ix);
    store<T>(y + i, sum / divisor<compute_t<T>>(s, win, include_pad));
  }
};

template <class T>
struct AvgBackward {
  PoolShape s;
  T* dx;
  const T* dy;
  bool include_pad;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t ix = i % s.w, iy = (i / s.w) % s.h, plane = i / (s.w * s.h);
    const T* gp = dy + plane * s.oh * s.ow;
    int64_t y0, y1, x0, x1;
    covering(iy, s.kh, s.stride_h, s.pad_h, s.oh, y0, y1);
    covering(ix, s.kw, s.stride_w, s.pad_w, s.ow, x0, x1);
    compute_t<T> acc = 0;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = x0; ox < x1; ++ox) {
        acc += load<T>(gp + oy * s.ow + ox) / divisor<compute_t<T>>(s, window(s, oy, ox), include_pad);
      }
    store<T>(dx + i, acc);
  }
};

template <class T>
constexpr bool kFloating = std::is_floating_point_v<compute_t<T>>;

}  // namespace

void max_pool2d(DType dtype, void* y, int32_t* idx, const void* x, const PoolShape& s) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (kFloating<T>) {
      for_each(s.planes * s.oh * s.ow, MaxForward<T>{s, static_cast<T*>(y), idx, static_cast<const T*>(x)},
               "max_pool2d");
    }
  });
}

void max_pool2d_backward(DType dtype, void* dx, const void* dy, const int32_t* idx, const PoolShape& s) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (kFloating<T>) {
      for_each(s.planes * s.h * s.w, MaxBackward<T>{s, static_cast<T*>(dx), static_cast<const T*>(dy), idx},
               "max_pool2d_backward");
    }
  });
}

void avg_pool2d(DType dtype, void* y, const void* x, const PoolShape& s, bool count_include_pad) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (kFloating<T>) {
      for_each(s.planes * s.oh * s.ow,
               AvgForward<T>{s, static_cast<T*>(y), static_cast<const T*>(x), count_include_pad}, "avg_pool2d");
    }
  });
}

void avg_pool2d_backward(DType dtype, void* dx, const void* dy, const PoolShape& s, bool count_include_pad) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (kFloating<T>) {
      for_each(s.planes * s.h * s.w,
               AvgBackward<T>{s, static_cast<T*>(dx), static_cast<const T*>(dy), count_include_pad},
               "avg_pool2d_backward");
    }
  });
}

}  // namespace braid::cuda
