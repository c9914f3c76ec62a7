#include "braid/tensor/cpu/pool.h"

#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"

namespace braid::cpu {
namespace {

// Planes per parallel chunk: enough work (~16k outputs) to pay a fork.
int64_t plane_grain(const Pool2dGeometry& g) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.oh() * g.ow()));
}

// Window rows [y0, y1) and columns [x0, x1) of output (oy, ox), clipped to the input.
struct Window {
  int64_t y0, y1, x0, x1;
};
inline Window window(const Pool2dGeometry& g, int64_t oy, int64_t ox) {
  const int64_t ys = oy * g.stride_h - g.pad_h, xs = ox * g.stride_w - g.pad_w;
  return {std::max<int64_t>(ys, 0), std::min(ys + g.kh, g.h), std::max<int64_t>(xs, 0),
          std::min(xs + g.kw, g.w)};
}

template <class T>
void max_plane(const Pool2dGeometry& g, const T* x, T* y, int32_t* idx) {
  const int64_t oh = g.oh(), ow = g.ow();
  if (g.kh == 2 && g.kw == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0) {
    // The CNN's 2x2/2 pool: two input rows per output row, no clipping.
    for (int64_t oy = 0; oy < oh; ++oy) {
      const T* r0 = x + 2 * oy * g.w;
      const T* r1 = r0 + g.w;
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t c = 2 * ox;
        T best = r0[c];
        int64_t at = 2 * oy * g.w + c;
        auto take = [&](T v, int64_t i) {
          if (v > best || std::isnan(v)) {
            best = v;
            at = i;
          }
        };
        take(r0[c + 1], at + 1);
        take(r1[c], (2 * oy + 1) * g.w + c);
        take(r1[c + 1], (2 * oy + 1) * g.w + c + 1);
        y[oy * ow + ox] = best;
        idx[oy * ow + ox] = static_cast<int32_t>(at);
      }
    }
    return;
  }
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      const Window win = window(g, oy, ox);
      int64_t at = win.y0 * g.w + win.x0;
      T best = x[at];
      for (int64_t iy = win.y0; iy < win.y1; ++iy)
        for (int64_t ix = win.x0; ix < win.x1; ++ix) {
          const T v = x[iy * g.w + ix];
          if (v > best || std::isnan(v)) {
            best = v;
            at = iy * g.w + ix;
          }
        }
      y[oy * ow + ox] = best;
      idx[oy * ow + ox] = static_cast<int32_t>(at);
    }
}

template <class T>
T divisor(const Pool2dGeometry& g, const Window& win, bool count_include_pad) {
  return count_include_pad ? T(g.kh * g.kw) : T((win.y1 - win.y0) * (win.x1 - win.x0));
}

}  // namespace

template <class T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* idx) {
  const int64_t in = g.h * g.w, out = g.oh() * g.ow();
  parallel_for(0, g.planes, plane_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) max_plane(g, x + p * in, y + p * out, idx + p * out);
  });
}

template <class T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* idx, T* dx) {
  const int64_t in = g.h * g.w, out = g.oh() * g.ow();
  parallel_for(0, g.planes, plane_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      T* d = dx + p * in;
      std::fill(d, d + in, T(0));
      const T* gy = dy + p * out;
      const int32_t* ix = idx + p * out;
      for (int64_t i = 0; i < out; ++i) d[ix[i]] += gy[i];
    }
  });
}

template <class T>
void avg_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, bool count_include_pad) {
  const int64_t in = g.h * g.w, oh = g.oh(), ow = g.ow();
  parallel_for(0, g.planes, plane_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const T* xp = x + p * in;
      T* yp = y + p * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const Window win = window(g, oy, ox);
          T s = T(0);
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) s += xp[iy * g.w + ix];
          yp[oy * ow + ox] = s / divisor<T>(g, win, count_include_pad);
        }
    }
  });
}

template <class T>
void avg_pool2d_backward(const Pool2dGeometry& g, const T* dy, T* dx, bool count_include_pad) {
  const int64_t in = g.h * g.w, oh = g.oh(), ow = g.ow();
  parallel_for(0, g.planes, plane_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      T* dp = dx + p * in;
      std::fill(dp, dp + in, T(0));
      const T* gp = dy + p * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const Window win = window(g, oy, ox);
          const T v = gp[oy * ow + ox] / divisor<T>(g, win, count_include_pad);
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) dp[iy * g.w + ix] += v;
        }
    }
  });
}

#define BRAID_POOL_INSTANTIATE(T)                                                              \
  template void max_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, int32_t*);         \
  template void max_pool2d_backward<T>(const Pool2dGeometry&, const T*, const int32_t*, T*);  \
  template void avg_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, bool);             \
  template void avg_pool2d_backward<T>(const Pool2dGeometry&, const T*, T*, bool);
BRAID_POOL_INSTANTIATE(float)
BRAID_POOL_INSTANTIATE(double)
#undef BRAID_POOL_INSTANTIATE

}  // namespace braid::cpu
