// blas.h for the emulated CUDA backend: the reference product, one dot
// product per element of C accumulated in double, over host memory (a call
// counts as one launch; the null device skips it). Slow and
// exact enough that the op table compares the glue (layouts, transposes,
// broadcast and summed batches) against the CPU backend at its tolerances.
#include "braid/base/error.h"
#include "braid/cuda/blas.h"
#include "braid/cuda/loop.h"

namespace braid::cuda::blas {

namespace {

template <class T>
double at(const Operand& x, int64_t t, int64_t i, int64_t j) {
  const T* p = static_cast<const T*>(x.data) + t * x.batch_stride + (x.trans ? j * x.ld + i : i * x.ld + j);
  return static_cast<double>(load<T>(p));
}

template <class T, class C>
void run(const Gemm& g) {
  for (int64_t t = 0; t < g.batch; ++t)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < g.k; ++l) s += at<T>(g.a, t, i, l) * at<T>(g.b, t, l, j);
        C* c = static_cast<C*>(g.c_data) + t * g.c_batch_stride + i * g.ldc + j;
        double v = g.alpha * s;
        if (g.beta != 0) v += g.beta * static_cast<double>(load<C>(c));
        store<C>(c, static_cast<compute_t<C>>(v));
      }
}

}  // namespace

void gemm(const Gemm& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (g.k == 0 && g.beta != 0 && g.beta != 1) {
    fail<ValueError>("cuBLAS GEMM: an empty sum (k = 0) takes beta 0 or 1, got {}", g.beta);
  }
  const bool half = g.ab == DType::f16 || g.ab == DType::bf16;
  if (g.ab == g.c || (half && g.c == DType::f32)) {
    if (!emulated::launch("gemm")) return;
    switch (g.ab) {
      case DType::f32: return run<float, float>(g);
      case DType::f64: return run<double, double>(g);
      case DType::f16: return g.c == DType::f32 ? run<f16, float>(g) : run<f16, f16>(g);
      case DType::bf16: return g.c == DType::f32 ? run<bf16, float>(g) : run<bf16, bf16>(g);
      default: break;
    }
  }
  fail<ValueError>("cuBLAS GEMM: {} operands cannot write a {} result", name(g.ab), name(g.c));
}

}  // namespace braid::cuda::blas
