#include "braid/ops/reduce.h"

#include <limits>
#include <numeric>

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "braid/tensor/cpu/index.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

using autograd::record;
using Grads = std::vector<Tensor>;

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

// x's shape with the reduced dims set to 1 (the keepdim shape).
Shape keep_shape(const Tensor& x, const std::vector<int64_t>& dims, const char* name) {
  Shape s = x.shape();
  if (x.ndim() == 0) return s;  // a 0-d tensor reduces to itself
  for (int64_t d : dims) s[wrap_dim(d, x.ndim(), name)] = 1;
  return s;
}

int64_t reduced_count(const Tensor& x, const std::vector<int64_t>& dims, const char* name) {
  int64_t n = 1;
  if (x.ndim() == 0) return n;
  for (int64_t d : dims) n *= x.shape()[wrap_dim(d, x.ndim(), name)];
  return n;
}

// The backward of a (scaled) sum: g broadcast back over the reduced dims.
Tensor sum_backward(const Tensor& g, const Shape& keep, const Shape& in_shape, double scale) {
  Tensor gk = reshape(g, keep);
  Tensor out = Tensor::empty(in_shape, g.dtype());
  out.copy_from(expand(gk, in_shape));
  return scale == 1 ? out : mul(out, scale);
}

Tensor scaled_sum(const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double scale) {
  Tensor y = cpu::sum(x, dims, keepdim, scale, name);
  record(name, {x}, y, [keep = keep_shape(x, dims, name), in_shape = x.shape(), scale](const Tensor& g) {
    return Grads{sum_backward(g, keep, in_shape, scale)};
  });
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum(x, all_dims(x), false); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return scaled_sum("sum", x, dims, keepdim, 1.0);
}

Tensor mean(const Tensor& x) { return mean(x, all_dims(x), false); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (!is_floating(x.dtype())) fail<ValueError>("mean: dtype {} is not floating (input {})", name(x.dtype()), to_string(x.shape()));
  const int64_t n = reduced_count(x, dims, "mean");
  return scaled_sum("mean", x, dims, keepdim, n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_or_all, bool unbiased, bool keepdim) {
  const std::vector<int64_t> dims = dims_or_all.empty() ? all_dims(x) : dims_or_all;
  // Composite of primitives (docs/design.md, "Composite ops are written in
  // primitives"): sum((x - mean)^2) / (n - correction).
  const int64_t n = reduced_count(x, dims, "var");
  const Tensor centered = sub(x, mean(x, dims, true));
  const double denom = static_cast<double>(n - (unbiased ? 1 : 0));
  return div(sum(mul(centered, centered), dims, keepdim), denom);
}

MaxResult max(const Tensor& x, int64_t dim, bool keepdim) {
  cpu::MaxResult r = cpu::max_dim(x, dim, keepdim, "max");
  const int64_t d = x.ndim() > 0 ? wrap_dim(dim, x.ndim(), "max") : 0;
  record("max", {x}, r.values, [in_shape = x.shape(), keep = keep_shape(x, {dim}, "max"), d,
                                idx = r.indices](const Tensor& g) {
    // The gradient goes to the position of each maximum.
    Tensor gx = Tensor::zeros(in_shape, g.dtype());
    cpu::scatter_add_into(gx, d, reshape(idx, keep), reshape(g, keep), "max");
    return Grads{gx};
  });
  return {r.values, r.indices};
}

Tensor max(const Tensor& x) {
  Tensor flat = reshape(x, {-1});
  return reshape(max(flat, 0, false).values, {});
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return cpu::max_dim(x, dim, keepdim, "argmax").indices; }

Tensor argmax(const Tensor& x) {
  Tensor flat = x.contiguous();
  flat = flat.as_strided({flat.numel()}, {1}, flat.offset());
  Tensor i = cpu::max_dim(flat, 0, false, "argmax").indices;
  return i.as_strided({}, {}, i.offset());
}

}  // namespace braid
