#include "braid/cuda/loss_kernels.h"

namespace braid::cuda {

namespace {

// A mean over n terms: term(i) supplies them, the result goes to out[0].
template <class T, class Term>
struct MeanJob {
  using Acc = compute_t<T>;  // float or double
  Term term;
  T* out;
  int64_t n;

  BRAID_HD Acc identity() const { return Acc(0); }
  BRAID_HD int row(int64_t) const { return 0; }
  BRAID_HD void fold(Acc& acc, int, int64_t i) const { acc += term(i); }
  BRAID_HD Acc combine(Acc a, Acc b) const { return a + b; }
  // 0 / 0 is NaN for no terms, as on the CPU.
  BRAID_HD void finish(int, Acc acc) const { store<T>(out, acc / static_cast<Acc>(n)); }
};

template <class T, class Term>
void mean(const Term& term, void* out, int64_t n, void* scratch, const char* what) {
  // n == 0 runs one thread that folds nothing.
  reduce(MeanJob<T, Term>{term, static_cast<T*>(out), n}, 1, n, reduce_shape(1, n, true), scratch, what);
}

template <class T>
struct Picked {
  const T* logp;
  const int64_t* targets;
  int64_t c;
  // A target out of range (raised at the next sync: deferred_checks.h) reads nothing.
  BRAID_HD compute_t<T> operator()(int64_t i) const {
    const int64_t t = targets[i];
    return t >= 0 && t < c ? -load<T>(logp + i * c + t) : compute_t<T>(0);
  }
};

template <class T>
struct BceTerm {
  const T* x;
  const T* y;
  BRAID_HD compute_t<T> operator()(int64_t i) const {
    using C = compute_t<T>;
    const C v = load<T>(x + i);
    return (v > C(0) ? v : C(0)) - v * load<T>(y + i) + std::log1p(std::exp(-std::abs(v)));
  }
};

template <class T>
struct CrossEntropyGrad {
  T* gx;
  const T* g;
  const T* logp;
  const int64_t* targets;
  int64_t n, c;
  BRAID_HD void operator()(int64_t i) const {
    using C = compute_t<T>;
    const C scale = load<T>(g) / static_cast<C>(n);
    const int64_t row = i / c;
    const C v = std::exp(load<T>(logp + i)) * scale;
    store<T>(gx + i, i - row * c == targets[row] ? v - scale : v);
  }
};

template <class T>
struct BceGrad {
  T* gx;
  const T* g;
  const T* x;
  const T* y;
  int64_t n;
  BRAID_HD void operator()(int64_t i) const {
    using C = compute_t<T>;
    const C scale = load<T>(g) / static_cast<C>(n);
    store<T>(gx + i, (C(1) / (C(1) + std::exp(-load<T>(x + i))) - load<T>(y + i)) * scale);
  }
};

template <class T>
constexpr bool floating = std::is_floating_point_v<compute_t<T>>;

}  // namespace

void pick_mean(DType dtype, void* out, const void* logp, const int64_t* targets, int64_t n, int64_t c, void* scratch) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) mean<T>(Picked<T>{static_cast<const T*>(logp), targets, c}, out, n, scratch, "nll_loss");
  });
}

void bce_mean(DType dtype, void* out, const void* x, const void* y, int64_t n, void* scratch) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      mean<T>(BceTerm<T>{static_cast<const T*>(x), static_cast<const T*>(y)}, out, n, scratch, "bce_with_logits");
    }
  });
}

void cross_entropy_grad(DType dtype, void* gx, const void* g, const void* logp, const int64_t* targets, int64_t n,
                        int64_t c) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(n * c, CrossEntropyGrad<T>{static_cast<T*>(gx), static_cast<const T*>(g), static_cast<const T*>(logp),
                                          targets, n, c}, "cross_entropy_backward");
    }
  });
}

void bce_grad(DType dtype, void* gx, const void* g, const void* x, const void* y, int64_t n) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(n, BceGrad<T>{static_cast<T*>(gx), static_cast<const T*>(g), static_cast<const T*>(x),
                             static_cast<const T*>(y), n}, "bce_with_logits_backward");
    }
  });
}

}  // namespace braid::cuda
