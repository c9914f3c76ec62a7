#include "braid/tensor/cpu/index.h"

#include <algorithm>
#include <cstring>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/loops.h"

namespace braid::cpu {

namespace {

// Columns per task when a kernel splits the inner [B] extent over threads.
constexpr int64_t kBlock = 512;

struct Arb {
  int64_t A = 1, R = 1, B = 1;
};

Arb split_at(const Shape& shape, int64_t dim) {
  Arb s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) (d < dim ? s.A : d == dim ? s.R : s.B) *= shape[d];
  return s;
}

// Contiguous i64 index with every value in [0, bound).
Tensor checked_index(const Tensor& index, int64_t bound, const char* name, const Tensor& x, int64_t dim) {
  if (index.dtype() != DType::i64) {
    fail<ValueError>("{}: index must be i64, got {} {} (input {})", name, braid::name(index.dtype()),
                     to_string(index.shape()), to_string(x.shape()));
  }
  Tensor c = index.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    if (p[i] < 0 || p[i] >= bound) {
      fail<IndexError>("{}: index {} out of range for dim {} of size {} (input {}, index {})", name, p[i], dim, bound,
                       to_string(x.shape()), to_string(index.shape()));
    }
  }
  return c;
}

// index must match x in every dim but `dim` (gather / scatter_add).
void check_same_but_dim(const Tensor& x, const Tensor& index, int64_t dim, const char* name) {
  bool ok = index.ndim() == x.ndim();
  for (int64_t d = 0; ok && d < x.ndim(); ++d) ok = d == dim || index.shape()[d] == x.shape()[d];
  if (!ok) {
    fail<ValueError>("{}: index {} must match input {} in every dim but {}", name, to_string(index.shape()),
                     to_string(x.shape()), dim);
  }
}

template <class Fn>
void dispatch_float(const Tensor& t, const char* name, Fn&& fn) {
  if (t.dtype() == DType::f32) return fn(float{});
  if (t.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (tensor of shape {})", name, braid::name(t.dtype()),
                   to_string(t.shape()));
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, const char* name) {
  const int64_t d = wrap_dim(dim, x.ndim(), name);
  check_same_but_dim(x, index, d, name);
  const Arb s = split_at(x.shape(), d);
  const Tensor idx = checked_index(index, x.ndim() > 0 ? x.shape()[d] : 1, name, x, d);
  const int64_t J = index.ndim() > 0 ? index.shape()[d] : 1;
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xp = static_cast<const T*>(xc.raw_data());
    const int64_t* ip = idx.data<int64_t>();
    T* op = static_cast<T*>(out.raw_data());
    parallel_for(0, s.A * J, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s.B, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        const int64_t a = row / J;
        for (int64_t b = 0; b < s.B; ++b) op[row * s.B + b] = xp[(a * s.R + ip[row * s.B + b]) * s.B + b];
      }
    });
  });
  return out;
}

namespace {

// Runs fn(a, j, b0, b1) for every outer index a < A, source row j < J and
// column block [b0, b1) of B. A task owns one (a, column block) of the
// destination for all j, so adds through repeated indices never race.
template <class Fn>
void for_column_blocks(int64_t A, int64_t B, int64_t J, Fn fn) {
  const int64_t blocks = (B + kBlock - 1) / kBlock;
  parallel_for(0, A * blocks, std::max<int64_t>(1, kParallelGrain / (std::max<int64_t>(J, 1) * kBlock)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t t = lo; t < hi; ++t) {
                   const int64_t a = t / blocks, b0 = (t % blocks) * kBlock, b1 = std::min(B, b0 + kBlock);
                   for (int64_t j = 0; j < J; ++j) fn(a, j, b0, b1);
                 }
               });
}

}  // namespace

void scatter_add_into(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src, const char* name) {
  const int64_t d = wrap_dim(dim, dst.ndim(), name);
  check_same_but_dim(dst, index, d, name);
  if (src.shape() != index.shape() || src.dtype() != dst.dtype() || !dst.is_contiguous()) {
    fail<ValueError>("{}: source {} {} must have the index's shape {} and dtype {}", name, braid::name(src.dtype()),
                     to_string(src.shape()), to_string(index.shape()), braid::name(dst.dtype()));
  }
  const Arb s = split_at(dst.shape(), d);
  const Tensor idx = checked_index(index, dst.ndim() > 0 ? dst.shape()[d] : 1, name, dst, d);
  const int64_t J = index.ndim() > 0 ? index.shape()[d] : 1;
  Tensor sc = src.contiguous();
  dispatch_float(dst, name, [&](auto zero) {
    using T = decltype(zero);
    T* dp = dst.data<T>();
    const T* sp = sc.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    for_column_blocks(s.A, s.B, J, [&](int64_t a, int64_t j, int64_t b0, int64_t b1) {
      const int64_t row = (a * J + j) * s.B;
      for (int64_t b = b0; b < b1; ++b) dp[(a * s.R + ip[row + b]) * s.B + b] += sp[row + b];
    });
  });
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, const char* name) {
  if (index.ndim() != 1) {
    fail<ValueError>("{}: index must be 1-D, got {} (input {})", name, to_string(index.shape()), to_string(x.shape()));
  }
  if (x.ndim() == 0) fail<ValueError>("{}: cannot select from a 0-d tensor", name);
  const int64_t d = wrap_dim(dim, x.ndim(), name);
  const Arb s = split_at(x.shape(), d);
  const Tensor idx = checked_index(index, x.shape()[d], name, x, d);
  const int64_t J = index.numel();
  Shape shape = x.shape();
  shape[d] = J;
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(shape, x.dtype());
  const size_t row_bytes = static_cast<size_t>(s.B) * itemsize(x.dtype());
  const char* xp = static_cast<const char*>(xc.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  const int64_t* ip = idx.data<int64_t>();
  parallel_for(0, s.A * J, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s.B, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t a = row / J, j = row % J;
      std::memcpy(op + row * row_bytes, xp + (a * s.R + ip[j]) * row_bytes, row_bytes);
    }
  });
  return out;
}

void index_add_into(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src, const char* name) {
  if (index.ndim() != 1) fail<ValueError>("{}: index must be 1-D, got {}", name, to_string(index.shape()));
  const int64_t d = wrap_dim(dim, dst.ndim(), name);
  Shape expect = dst.shape();
  expect[d] = index.numel();
  if (src.shape() != expect || src.dtype() != dst.dtype() || !dst.is_contiguous()) {
    fail<ValueError>("{}: source {} {} must have shape {} and dtype {}", name, braid::name(src.dtype()),
                     to_string(src.shape()), to_string(expect), braid::name(dst.dtype()));
  }
  const Arb s = split_at(dst.shape(), d);
  const Tensor idx = checked_index(index, dst.shape()[d], name, dst, d);
  const int64_t J = index.numel();
  Tensor sc = src.contiguous();
  dispatch_float(dst, name, [&](auto zero) {
    using T = decltype(zero);
    T* dp = dst.data<T>();
    const T* sp = sc.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    for_column_blocks(s.A, s.B, J, [&](int64_t a, int64_t j, int64_t b0, int64_t b1) {
      T* drow = dp + (a * s.R + ip[j]) * s.B;
      const T* srow = sp + (a * J + j) * s.B;
      for (int64_t b = b0; b < b1; ++b) drow[b] += srow[b];
    });
  });
}

}  // namespace braid::cpu
