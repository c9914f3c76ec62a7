// CUDA kernels of the index family (braid/ops/index.cc, braid/tensor/cpu/
// index.cc) but embedding_bag (embedding_bag_ops.cc): the CPU kernels'
// shapes, dtypes and errors, plus f16 and bf16 for the accumulating ops. Index values are
// checked on the device (deferred_checks.h): one out of range raises the CPU
// kernel's IndexError at the next sync and is skipped by the kernels
// meanwhile; checking on the host cost a copy and a wait per call (an
// embedding's forward and backward: two syncs a step).
#include "braid/base/error.h"
#include "braid/cuda/deferred_checks.h"
#include "braid/cuda/index_kernels.h"
#include "braid/cuda/kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// [A, R, B] of `shape` around dim d (a 0-d tensor is one element).
IndexGeometry split_at(const Shape& shape, int64_t d, int64_t J) {
  IndexGeometry s;
  s.J = J;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) (i < d ? s.A : i == d ? s.R : s.B) *= shape[i];
  return s;
}

// The index, contiguous on the device, with a check that every value lies in
// [0, bound) queued behind it (raised at the next sync); `x` is the indexed
// tensor's shape, for the message.
Tensor checked_index(const Tensor& index, int64_t bound, const char* name, const Shape& x, int64_t dim) {
  if (index.dtype() != DType::i64) {
    fail<ValueError>("{}: index must be i64, got {} {} (input {})", name, braid::name(index.dtype()),
                     to_string(index.shape()), to_string(x));
  }
  Tensor t = index.contiguous();
  check_range_on_device(t, bound, [name, dim, bound, x = to_string(x), shape = to_string(index.shape())](int64_t,
                                                                                                           int64_t v) {
    return fmt::format("{}: index {} out of range for dim {} of size {} (input {}, index {})", name, v, dim, bound, x,
                       shape);
  });
  return t;
}

const int64_t* index_data(const Tensor& t) { return static_cast<const int64_t*>(t.raw_data()); }

// index must match x in every dim but `dim` (gather / scatter_add).
void check_same_but_dim(const Shape& x, const Tensor& index, int64_t dim, const char* name) {
  bool ok = index.ndim() == static_cast<int64_t>(x.size());
  for (int64_t d = 0; ok && d < index.ndim(); ++d) ok = d == dim || index.shape()[d] == x[d];
  if (!ok) {
    fail<ValueError>("{}: index {} must match input {} in every dim but {}", name, to_string(index.shape()),
                     to_string(x), dim);
  }
}

// Sums of f16/bf16 values gather in f32 (the scatters' atomics need it).
DType accumulator(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype; }

Tensor index_select_on(const Tensor& x, int64_t dim, const Tensor& index, const char* name) {
  if (index.ndim() != 1) {
    fail<ValueError>("{}: index must be 1-D, got {} (input {})", name, to_string(index.shape()), to_string(x.shape()));
  }
  if (x.ndim() == 0) fail<ValueError>("{}: cannot select from a 0-d tensor", name);
  const int64_t d = wrap_dim(dim, x.ndim(), name);
  const Tensor idx = checked_index(index, x.shape()[d], name, x.shape(), d);
  Shape shape = x.shape();
  shape[d] = index.numel();
  const Tensor xc = x.contiguous();
  Tensor out = empty_on(x, shape, x.dtype());
  index_select_rows(itemsize(x.dtype()), out.raw_data(), xc.raw_data(), index_data(idx),
                    split_at(x.shape(), d, index.numel()));
  return out;
}

Tensor gather_on(const Tensor& x, int64_t dim, const Tensor& index, const char* name) {
  const int64_t d = wrap_dim(dim, x.ndim(), name);
  check_same_but_dim(x.shape(), index, d, name);
  const Tensor idx = checked_index(index, x.ndim() > 0 ? x.shape()[d] : 1, name, x.shape(), d);
  const Tensor xc = x.contiguous();
  Tensor out = empty_on(x, index.shape(), x.dtype());
  gather_elements(itemsize(x.dtype()), out.raw_data(), xc.raw_data(), index_data(idx),
                  split_at(x.shape(), d, index.ndim() > 0 ? index.shape()[d] : 1));
  return out;
}

// Zeros of `shape` with src's slices added at index along dim (cpu::
// index_add_into into fresh zeros).
Tensor index_add_on(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape, const char* name) {
  if (index.ndim() != 1) fail<ValueError>("{}: index must be 1-D, got {}", name, to_string(index.shape()));
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), name);
  if (shape.empty()) fail<ValueError>("{}: cannot select from a 0-d tensor", name);
  Shape expect = shape;
  expect[d] = index.numel();
  if (src.shape() != expect) {
    fail<ValueError>("{}: source {} {} must have shape {} and dtype {}", name, braid::name(src.dtype()),
                     to_string(src.shape()), to_string(expect), braid::name(src.dtype()));
  }
  const Tensor idx = checked_index(index, shape[d], name, shape, d);
  const Tensor sc = src.contiguous();
  Tensor acc = Tensor::zeros(shape, accumulator(src.dtype()), src.device());
  index_add_rows(src.dtype(), acc.raw_data(), sc.raw_data(), index_data(idx), split_at(shape, d, index.numel()));
  return acc.to(src.dtype());
}

// Zeros of `shape` with src added at index along dim (cpu::scatter_add_into
// into fresh zeros).
Tensor scatter_add_on(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape, const char* name) {
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), name);
  check_same_but_dim(shape, index, d, name);
  if (src.shape() != index.shape()) {
    fail<ValueError>("{}: source {} {} must have the index's shape {} and dtype {}", name, braid::name(src.dtype()),
                     to_string(src.shape()), to_string(index.shape()), braid::name(src.dtype()));
  }
  const Tensor idx = checked_index(index, shape.empty() ? 1 : shape[d], name, shape, d);
  const Tensor sc = src.contiguous();
  Tensor acc = Tensor::zeros(shape, accumulator(src.dtype()), src.device());
  scatter_add_elements(src.dtype(), acc.raw_data(), sc.raw_data(), index_data(idx),
                       split_at(shape, d, index.ndim() > 0 ? index.shape()[d] : 1));
  return acc.to(src.dtype());
}

}  // namespace

void install_index_kernels(const op::KernelAdder& add) {
  add("embedding", cuda_kernel({}, [](const Args& a) {
        const Tensor& weight = a.inputs[0];
        const Tensor& indices = a.inputs[1];
        if (weight.ndim() != 2) {
          fail<ValueError>("embedding: weight must be [V, D], got {} (indices {})", to_string(weight.shape()),
                           to_string(indices.shape()));
        }
        const Tensor ic = indices.contiguous();
        const Tensor rows = index_select_on(weight, 0, ic.as_strided({ic.numel()}, {1}, ic.offset()), "embedding");
        Shape shape = indices.shape();
        shape.push_back(weight.size(1));
        return Outputs{rows.as_strided(shape, contiguous_strides(shape), 0)};
      }));
  add("index_select", cuda_kernel({}, [](const Args& a) {
        return Outputs{index_select_on(a.inputs[0], a.attrs.i("dim"), a.inputs[1], "index_select")};
      }));
  add("index_select_backward", cuda_kernel(kFloats, [](const Args& a) {
        return Outputs{index_add_on(a.inputs[0], a.attrs.i("dim"), a.inputs[1], a.attrs.ints("shape"),
                                    "index_select_backward")};
      }));
  add("gather", cuda_kernel({}, [](const Args& a) {
        return Outputs{gather_on(a.inputs[0], a.attrs.i("dim"), a.inputs[1], "gather")};
      }));
  add("gather_backward", cuda_kernel(kFloats, [](const Args& a) {
        return Outputs{scatter_add_on(a.inputs[0], a.attrs.i("dim"), a.inputs[1], a.attrs.ints("shape"),
                                      "gather_backward")};
      }));
}

}  // namespace braid::cuda
