// CUDA kernels of the reduce family (braid/ops/reduce.cc, and sum_to of
// braid/ops/elementwise.cc): the CPU kernels' attributes, output shapes and
// errors (braid/tensor/cpu/reduce.cc), plus f16 and bf16. Inputs are read in
// place through their strides; the CPU's permuted copy is not needed.
#include <limits>

#include "braid/base/error.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/reduce_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// The kept dims of x index the outputs (written contiguously, in order), the
// reduced dims the elements of each.
ReducePlan plan_for(const Tensor& x, const std::vector<bool>& reduce) {
  Shape kept, kept_x, red, red_x;
  for (size_t d = 0; d < reduce.size(); ++d) {
    (reduce[d] ? red : kept).push_back(x.shape()[d]);
    (reduce[d] ? red_x : kept_x).push_back(x.strides()[d]);
  }
  const Shape kept_out = contiguous_strides(kept);
  const Shape* outer[2] = {&kept_out, &kept_x};
  const Shape* inner[1] = {&red_x};
  ReducePlan p;
  p.outer = make_indexer<2>(kept, outer);
  p.inner = make_indexer<1>(red, inner);
  p.n_out = numel(kept);
  p.r = numel(red);
  return p;
}

// Device scratch for a two-stage reduction (freed in stream order, so it may
// go out of scope while the kernels still run).
Tensor scratch_for(const Tensor& x, const ReducePlan& p) {
  const size_t bytes = p.scratch_bytes();
  return bytes ? empty_on(x, {static_cast<int64_t>(bytes)}, DType::u8) : Tensor();
}

// scale * sum of x over the reduced dims, into a fresh contiguous tensor of
// `shape` (the kept dims, with or without 1s).
Tensor sum_into(const Tensor& x, const std::vector<bool>& reduce, const Shape& shape, double scale) {
  Tensor out = empty_on(x, shape, x.dtype());
  const ReducePlan p = plan_for(x, reduce);
  const Tensor scratch = scratch_for(x, p);
  sum(x.dtype(), out.raw_data(), x.raw_data(), p, scale, data_or_null(scratch));
  return out;
}

Tensor sum_dims(const Tensor& x, const op::Attrs& a, bool mean, const char* name) {
  const std::vector<bool> reduce = reduced_dims(x.shape(), a.ints("dims"), name);
  int64_t n = 1;
  for (size_t d = 0; d < reduce.size(); ++d) n *= reduce[d] ? x.shape()[d] : 1;
  // mean's factor: 1/n, NaN for an empty reduction (as PyTorch).
  const double scale = !mean ? 1.0 : n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
  return sum_into(x, reduce, reduced_shape(x.shape(), reduce, a.b("keepdim")), scale);
}

// cpu::sum_to: the inverse of broadcasting `shape` to x's shape.
Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return sum_into(x, sum_to_dims(x.shape(), shape), shape, 1.0);
}

struct MaxResult {
  Tensor values;   // x's dtype
  Tensor indices;  // i64
};

// cpu::max_dim: max along one dim and the position of the first maximum.
MaxResult max_dim(const Tensor& x, int64_t dim, bool keepdim, const char* name) {
  const int64_t nd = x.ndim();
  const int64_t d = wrap_dim(dim, nd, name);
  if (nd > 0 && x.shape()[d] == 0) {
    fail<ValueError>("{}: cannot take the max of an empty dimension {} (input {})", name, dim, to_string(x.shape()));
  }
  std::vector<bool> reduce(static_cast<size_t>(nd), false);
  if (nd > 0) reduce[d] = true;
  const Shape shape = reduced_shape(x.shape(), reduce, keepdim);
  MaxResult res{empty_on(x, shape, x.dtype()), empty_on(x, shape, DType::i64)};
  const ReducePlan p = plan_for(x, reduce);
  const Tensor scratch = scratch_for(x, p);
  max_along(x.dtype(), res.values.raw_data(), static_cast<int64_t*>(res.indices.raw_data()), x.raw_data(), p,
            data_or_null(scratch));
  return res;
}

}  // namespace

void install_reduce_kernels(const op::KernelAdder& add) {
  add("sum", cuda_kernel(kNumbers, [](const Args& a) { return Outputs{sum_dims(a.inputs[0], a.attrs, false, "sum")}; }));
  add("mean", cuda_kernel(kFloats, [](const Args& a) { return Outputs{sum_dims(a.inputs[0], a.attrs, true, "mean")}; }));
  add("sum_to", cuda_kernel(kNumbers, [](const Args& a) { return Outputs{sum_to(a.inputs[0], a.attrs.ints("shape"))}; }));
  add("max", cuda_kernel(kNumbers, [](const Args& a) {
        MaxResult r = max_dim(a.inputs[0], a.attrs.i("dim"), a.attrs.b("keepdim"), "max");
        return Outputs{r.values, r.indices};
      }));
  add("argmax", cuda_kernel(kNumbers, [](const Args& a) {
        return Outputs{max_dim(a.inputs[0], a.attrs.i("dim"), a.attrs.b("keepdim"), "argmax").indices};
      }));
}

}  // namespace braid::cuda
