// Convolution as im2col + GEMM (see conv.h). Per image and group:
//   cols [cg*kh*kw, oh*ow] = im2col(x[n, group])
//   forward:          y[n, group] [og, oh*ow]  = w_group [og, K] x cols
//   backward data:    dcols = w_group^T x dy[n, group];  dx[n, group] = col2im(dcols)
//   backward weights: dw_group [og, K] += dy[n, group] x cols^T
// A 1x1 filter with stride 1 and no padding uses x itself as cols.
#include <algorithm>
#include <cstring>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/cpu/gemm.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu::im2col {
namespace {

bool is_pointwise(const Conv2dGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
         g.pad_w == 0;
}

// Output columns ox in [lo, hi) read an input column inside [0, w) for filter tap j.
void valid_range(const Conv2dGeometry& g, int64_t j, int64_t ow, int64_t* lo, int64_t* hi) {
  const int64_t shift = g.pad_w - j * g.dil_w;  // ix = ox * stride - shift
  int64_t l = shift <= 0 ? 0 : (shift + g.stride_w - 1) / g.stride_w;
  int64_t h = (g.w - 1 + shift) < 0 ? 0 : (g.w - 1 + shift) / g.stride_w + 1;
  *lo = std::min(l, ow);
  *hi = std::clamp(h, *lo, ow);
}

// x [cg, h, w] -> cols [cg*kh*kw, oh*ow]
template <class T>
void to_cols(const Conv2dGeometry& g, int64_t cg, const T* x, T* cols) {
  const int64_t oh = g.oh(), ow = g.ow(), p = oh * ow;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        int64_t lo, hi;
        valid_range(g, j, ow, &lo, &hi);
        const int64_t shift = g.pad_w - j * g.dil_w;
        for (int64_t oy = 0; oy < oh; ++oy) {
          T* dst = row + oy * ow;
          const int64_t iy = oy * g.stride_h - g.pad_h + i * g.dil_h;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + ow, T(0));
            continue;
          }
          const T* src = x + (c * g.h + iy) * g.w;
          std::fill(dst, dst + lo, T(0));
          if (g.stride_w == 1) {
            std::memcpy(dst + lo, src + lo - shift, sizeof(T) * (hi - lo));
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g.stride_w - shift];
          }
          std::fill(dst + hi, dst + ow, T(0));
        }
      }
}

// dx [cg, h, w] += col2im(cols [cg*kh*kw, oh*ow])
template <class T>
void add_cols(const Conv2dGeometry& g, int64_t cg, const T* cols, T* dx) {
  const int64_t oh = g.oh(), ow = g.ow(), p = oh * ow;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        int64_t lo, hi;
        valid_range(g, j, ow, &lo, &hi);
        const int64_t shift = g.pad_w - j * g.dil_w;
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * g.stride_h - g.pad_h + i * g.dil_h;
          if (iy < 0 || iy >= g.h) continue;
          const T* src = row + oy * ow;
          T* dst = dx + (c * g.h + iy) * g.w;
          if (g.stride_w == 1) {
            T* d = dst - shift;
            for (int64_t ox = lo; ox < hi; ++ox) d[ox] += src[ox];
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox * g.stride_w - shift] += src[ox];
          }
        }
      }
}

// Splits images into at most num_threads() contiguous chunks; fn(chunk, lo, hi).
template <class Fn>
int64_t for_image_chunks(int64_t n, Fn&& fn) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(c, n * c / chunks, n * (c + 1) / chunks);
  });
  return chunks;
}

struct Dims {
  int64_t cg, og, k, p;  // channels and filters per group, cg*kh*kw, oh*ow
  explicit Dims(const Conv2dGeometry& g)
      : cg(g.c / g.groups), og(g.o / g.groups), k(cg * g.kh * g.kw), p(g.oh() * g.ow()) {}
};

}  // namespace

template <class T>
void forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  const Dims d(g);
  const bool pointwise = is_pointwise(g);
  for_image_chunks(g.n, [&](int64_t, int64_t lo, int64_t hi) {
    Tensor scratch = Tensor::empty({pointwise ? 0 : d.k * d.p}, dtype_of<T>());
    T* cols = scratch.data<T>();
    for (int64_t ni = lo; ni < hi; ++ni)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const T* xg = x + (ni * g.c + gi * d.cg) * g.h * g.w;
        T* yg = y + (ni * g.o + gi * d.og) * d.p;
        if (b != nullptr) {
          for (int64_t oc = 0; oc < d.og; ++oc) std::fill(yg + oc * d.p, yg + (oc + 1) * d.p, b[gi * d.og + oc]);
        }
        if (!pointwise) to_cols(g, d.cg, xg, cols);
        gemm(false, false, d.og, d.p, d.k, T(1), w + gi * d.og * d.k, std::max<int64_t>(1, d.k),
             pointwise ? xg : cols, std::max<int64_t>(1, d.p), b != nullptr ? T(1) : T(0), yg,
             std::max<int64_t>(1, d.p));
      }
  });
}

template <class T>
void backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx) {
  const Dims d(g);
  const bool pointwise = is_pointwise(g);
  for_image_chunks(g.n, [&](int64_t, int64_t lo, int64_t hi) {
    Tensor scratch = Tensor::empty({pointwise ? 0 : d.k * d.p}, dtype_of<T>());
    T* dcols = scratch.data<T>();
    for (int64_t ni = lo; ni < hi; ++ni)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        T* dxg = dx + (ni * g.c + gi * d.cg) * g.h * g.w;
        const T* dyg = dy + (ni * g.o + gi * d.og) * d.p;
        // [K, og] x [og, P]: w_group stored [og, K], read transposed.
        gemm(true, false, d.k, d.p, d.og, T(1), w + gi * d.og * d.k, std::max<int64_t>(1, d.k), dyg,
             std::max<int64_t>(1, d.p), T(0), pointwise ? dxg : dcols, std::max<int64_t>(1, d.p));
        if (!pointwise) {
          std::fill(dxg, dxg + d.cg * g.h * g.w, T(0));
          add_cols(g, d.cg, dcols, dxg);
        }
      }
  });
}

template <class T>
void backward_weights(const Conv2dGeometry& g, const T* dy, const T* x, T* dw, T* db) {
  const Dims d(g);
  const bool pointwise = is_pointwise(g);
  const int64_t wsize = g.o * d.k;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), g.n));
  // Chunk 0 accumulates into dw/db, the others into partial sums added at the end.
  Tensor partial = Tensor::empty({(chunks - 1) * (wsize + g.o)}, dtype_of<T>());
  for_image_chunks(g.n, [&](int64_t chunk, int64_t lo, int64_t hi) {
    T* dwc = chunk == 0 ? dw : partial.data<T>() + (chunk - 1) * (wsize + g.o);
    T* dbc = chunk == 0 ? db : partial.data<T>() + (chunk - 1) * (wsize + g.o) + wsize;
    std::fill(dwc, dwc + wsize, T(0));
    if (dbc != nullptr) std::fill(dbc, dbc + g.o, T(0));
    Tensor scratch = Tensor::empty({pointwise ? 0 : d.k * d.p}, dtype_of<T>());
    T* cols = scratch.data<T>();
    for (int64_t ni = lo; ni < hi; ++ni)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const T* xg = x + (ni * g.c + gi * d.cg) * g.h * g.w;
        const T* dyg = dy + (ni * g.o + gi * d.og) * d.p;
        if (!pointwise) to_cols(g, d.cg, xg, cols);
        // [og, P] x [P, K]: cols stored [K, P], read transposed.
        gemm(false, true, d.og, d.k, d.p, T(1), dyg, std::max<int64_t>(1, d.p),
             pointwise ? xg : cols, std::max<int64_t>(1, d.p), T(1), dwc + gi * d.og * d.k,
             std::max<int64_t>(1, d.k));
        if (dbc != nullptr) {
          for (int64_t oc = 0; oc < d.og; ++oc) {
            const T* row = dyg + oc * d.p;
            T s = T(0);
            for (int64_t q = 0; q < d.p; ++q) s += row[q];
            dbc[gi * d.og + oc] += s;
          }
        }
      }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const T* src = partial.data<T>() + (c - 1) * (wsize + g.o);
    for (int64_t i = 0; i < wsize; ++i) dw[i] += src[i];
    if (db != nullptr) {
      for (int64_t i = 0; i < g.o; ++i) db[i] += src[wsize + i];
    }
  }
}

template void forward<float>(const Conv2dGeometry&, const float*, const float*, const float*, float*);
template void forward<double>(const Conv2dGeometry&, const double*, const double*, const double*, double*);
template void backward_data<float>(const Conv2dGeometry&, const float*, const float*, float*);
template void backward_data<double>(const Conv2dGeometry&, const double*, const double*, double*);
template void backward_weights<float>(const Conv2dGeometry&, const float*, const float*, float*, float*);
template void backward_weights<double>(const Conv2dGeometry&, const double*, const double*, double*, double*);

}  // namespace braid::cpu::im2col
