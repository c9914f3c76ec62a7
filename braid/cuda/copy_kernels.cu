#include "braid/cuda/copy_kernels.h"

namespace braid::cuda {

namespace {

template <class D, class S>
struct CopyCast {
  Indexer<2> ix;
  D* dst;
  const S* src;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[2];
    ix.offsets(i, off);
    store<D>(dst + off[0], make<compute_t<D>>(load<S>(src + off[1])));
  }
};

template <class T>
struct Fill {
  Indexer<1> ix;
  T* dst;
  compute_t<T> value;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[1];
    ix.offsets(i, off);
    store<T>(dst + off[0], value);
  }
};

}  // namespace

void copy_cast(DType dst_dtype, void* dst, DType src_dtype, const void* src, const Indexer<2>& ix, int64_t n) {
  visit(dst_dtype, [&](auto d) {
    using D = decltype(d);
    visit(src_dtype, [&](auto s) {
      using S = decltype(s);
      for_each(n, CopyCast<D, S>{ix, static_cast<D*>(dst), static_cast<const S*>(src)}, "copy");
    });
  });
}

void fill(DType dtype, void* dst, double value, const Indexer<1>& ix, int64_t n) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    for_each(n, Fill<T>{ix, static_cast<T*>(dst), make<compute_t<T>>(value)}, "fill");
  });
}

}  // namespace braid::cuda
