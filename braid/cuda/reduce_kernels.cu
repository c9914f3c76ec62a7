#include "braid/cuda/reduce_kernels.h"

namespace braid::cuda {

namespace {

// Offset of element i of one reduction; one reduced dim (the common case)
// needs no divisions.
BRAID_HD inline int64_t inner_offset(const Indexer<1>& ix, int64_t i) {
  if (ix.ndim <= 1) return i * ix.strides[0][0];
  int64_t off[1];
  ix.offsets(i, off);
  return off[0];
}

// Where output o is written and where its elements start in x.
struct Base {
  int64_t out, x;
};
BRAID_HD inline Base base_of(const Indexer<2>& outer, int64_t o) {
  int64_t off[2];
  outer.offsets(o, off);
  return {off[0], off[1]};
}

template <class T>
struct SumJob {
  using Acc = acc_t<T>;
  Indexer<2> outer;
  Indexer<1> inner;
  T* out;
  const T* x;
  Acc scale;  // unused for integers

  BRAID_HD Acc identity() const { return Acc(0); }
  BRAID_HD Base row(int64_t o) const { return base_of(outer, o); }
  BRAID_HD void fold(Acc& acc, const Base& b, int64_t i) const {
    acc += static_cast<Acc>(load<T>(x + b.x + inner_offset(inner, i)));
  }
  BRAID_HD Acc combine(Acc a, Acc b) const { return a + b; }
  BRAID_HD void finish(const Base& b, Acc acc) const {
    if constexpr (std::is_integral_v<Acc>) {
      store<T>(out + b.out, static_cast<compute_t<T>>(acc));
    } else {
      store<T>(out + b.out, static_cast<compute_t<T>>(acc * scale));
    }
  }
};

template <class T>
struct MaxJob {
  using C = compute_t<T>;
  struct Acc {
    C v;
    int64_t at;  // position along the reduction; < 0: no element yet
  };
  Indexer<2> outer;
  Indexer<1> inner;
  T* values;
  int64_t* indices;
  const T* x;

  BRAID_HD Acc identity() const { return {C(0), -1}; }
  BRAID_HD Base row(int64_t o) const { return base_of(outer, o); }
  BRAID_HD void fold(Acc& acc, const Base& b, int64_t i) const {
    acc = combine(acc, Acc{load<T>(x + b.x + inner_offset(inner, i)), i});
  }
  // The larger; NaN beats any number; ties go to the earlier position, so
  // the answer is torch.max's (first maximum, first NaN) in any fold order.
  BRAID_HD Acc combine(Acc a, Acc b) const {
    if (a.at < 0) return b;
    if (b.at < 0) return a;
    if constexpr (std::is_floating_point_v<C>) {
      const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
      if (a_nan != b_nan) return a_nan ? a : b;
      if (a_nan) return a.at < b.at ? a : b;
    }
    if (a.v > b.v) return a;
    if (b.v > a.v) return b;
    return a.at < b.at ? a : b;
  }
  BRAID_HD void finish(const Base& b, Acc acc) const {
    store<T>(values + b.out, acc.v);
    indices[b.out] = acc.at;
  }
};

// The dtypes the reductions take (the CPU's, plus f16 and bf16).
template <class T>
constexpr bool reducible = !std::is_same_v<T, bool> && !std::is_same_v<T, uint8_t>;

}  // namespace

void sum(DType dtype, void* out, const void* x, const ReducePlan& p, double scale, void* scratch) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (reducible<T>) {
      using Acc = acc_t<T>;
      Acc s = Acc(1);
      if constexpr (!std::is_integral_v<Acc>) s = static_cast<Acc>(scale);
      reduce(SumJob<T>{p.outer, p.inner, static_cast<T*>(out), static_cast<const T*>(x), s}, p.n_out, p.r,
             p.shape(), scratch, "sum");
    }
  });
}

void max_along(DType dtype, void* values, int64_t* indices, const void* x, const ReducePlan& p, void* scratch) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (reducible<T>) {
      reduce(MaxJob<T>{p.outer, p.inner, static_cast<T*>(values), indices, static_cast<const T*>(x)}, p.n_out, p.r,
             p.shape(), scratch, "max");
    }
  });
}

}  // namespace braid::cuda
