// dnn.h for the emulated CUDA backend: the three convolution products as
// direct loops over host memory, each output accumulated in double. The
// reference the conv ops' glue (bias, widening, empty shapes) runs over in
// braid_cuda_emulated_test.
#include <vector>

#include "braid/base/error.h"
#include "braid/cuda/dnn.h"
#include "braid/cuda/loop.h"

namespace braid::cuda::dnn {

namespace {

// Calls tap(n, o, oy, ox, c, iy, ix, ky, kx) for every (output pixel, filter
// tap) pair whose input pixel lies inside x (padding contributes nothing).
template <class Tap>
void for_each_tap(const Conv2dGeometry& g, Tap&& tap) {
  const int64_t cpg = g.c / g.groups, opg = g.o / g.groups;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oy = 0; oy < g.oh(); ++oy)
        for (int64_t ox = 0; ox < g.ow(); ++ox)
          for (int64_t ci = 0; ci < cpg; ++ci)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dil_h;
                const int64_t ix = ox * g.stride_w - g.pad_w + kx * g.dil_w;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                tap(n, o, oy, ox, (o / opg) * cpg + ci, iy, ix, ci, ky, kx);
              }
}

struct Offsets {
  const Conv2dGeometry& g;
  int64_t x(int64_t n, int64_t c, int64_t iy, int64_t ix) const { return ((n * g.c + c) * g.h + iy) * g.w + ix; }
  int64_t y(int64_t n, int64_t o, int64_t oy, int64_t ox) const {
    return ((n * g.o + o) * g.oh() + oy) * g.ow() + ox;
  }
  int64_t w(int64_t o, int64_t ci, int64_t ky, int64_t kx) const {
    return ((o * (g.c / g.groups) + ci) * g.kh + ky) * g.kw + kx;
  }
};

enum class Pass { forward, backward_data, backward_filter };

// out = the pass's product of a and b (the operands in dnn.h's order).
template <class T>
void run(Pass pass, const Conv2dGeometry& g, const void* a, const void* b, void* out) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  const Offsets at{g};
  const int64_t sizes[] = {g.n * g.o * g.oh() * g.ow(), g.n * g.c * g.h * g.w, g.o * (g.c / g.groups) * g.kh * g.kw};
  std::vector<double> acc(static_cast<size_t>(sizes[static_cast<int>(pass)]), 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oy, int64_t ox, int64_t c, int64_t iy, int64_t ix, int64_t ci,
                      int64_t ky, int64_t kx) {
    const int64_t xi = at.x(n, c, iy, ix), yi = at.y(n, o, oy, ox), wi = at.w(o, ci, ky, kx);
    switch (pass) {
      case Pass::forward:  // a = x, b = w
        acc[yi] += static_cast<double>(load<T>(pa + xi)) * static_cast<double>(load<T>(pb + wi));
        break;
      case Pass::backward_data:  // a = dy, b = w
        acc[xi] += static_cast<double>(load<T>(pa + yi)) * static_cast<double>(load<T>(pb + wi));
        break;
      case Pass::backward_filter:  // a = dy, b = x
        acc[wi] += static_cast<double>(load<T>(pa + yi)) * static_cast<double>(load<T>(pb + xi));
        break;
    }
  });
  T* po = static_cast<T*>(out);
  for (size_t i = 0; i < acc.size(); ++i) store<T>(po + i, static_cast<compute_t<T>>(acc[i]));
}

void dispatch(Pass pass, const Conv2dGeometry& g, DType dtype, const void* a, const void* b, void* out) {
  // One launch a call (the null device skips it); other dtypes fail below.
  const bool kernel = dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16;
  if (kernel && !emulated::launch("convolution")) return;
  switch (dtype) {
    case DType::f32: return run<float>(pass, g, a, b, out);
    case DType::f64: return run<double>(pass, g, a, b, out);
    case DType::f16: return run<f16>(pass, g, a, b, out);
    default: fail<ValueError>("cuDNN convolution: no {} kernels (bf16 is widened to f32 by the op)", name(dtype));
  }
}

}  // namespace

void conv2d_forward(const Conv2dGeometry& g, DType dtype, const void* x, const void* w, void* y, int) {
  dispatch(Pass::forward, g, dtype, x, w, y);
}
void conv2d_backward_data(const Conv2dGeometry& g, DType dtype, const void* dy, const void* w, void* dx, int) {
  dispatch(Pass::backward_data, g, dtype, dy, w, dx);
}
void conv2d_backward_filter(const Conv2dGeometry& g, DType dtype, const void* dy, const void* x, void* dw, int) {
  dispatch(Pass::backward_filter, g, dtype, dy, x, dw);
}

}  // namespace braid::cuda::dnn
