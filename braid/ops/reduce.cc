#include "braid/ops/reduce.h"

#include <limits>
#include <numeric>

#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/index.h"
#include "braid/ops/shape.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

// ---- the ops ----

namespace op {
namespace {

// A reduction's shapes: the result, and the input's shape with the reduced
// dims set to 1 (the keepdim shape, which the gradient is viewed as before it
// is broadcast back).
struct Reduction {
  Shape out, keep;
  int64_t count = 1;  // elements per result
};

Reduction reduction(const Shape& in, const std::vector<int64_t>& dims, bool keepdim, const char* name) {
  const int64_t nd = static_cast<int64_t>(in.size());
  std::vector<bool> reduce(in.size(), false);
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, nd, name);
    if (nd == 0) continue;  // a 0-d tensor reduces over "dim 0" to itself
    if (reduce[d]) fail<ValueError>("{}: dimension {} repeated in dims {} (input {})", name, dim, to_string(dims), to_string(in));
    reduce[d] = true;
  }
  Reduction r;
  for (int64_t d = 0; d < nd; ++d) {
    r.keep.push_back(reduce[d] ? 1 : in[d]);
    if (reduce[d]) r.count *= in[d];
    if (!reduce[d] || keepdim) r.out.push_back(r.keep.back());
  }
  return r;
}

// max and argmax reduce one dim, which must not be empty.
Reduction reduction_of_one(const Shape& in, int64_t dim, bool keepdim, const char* name) {
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(in.size()), name);
  if (!in.empty() && in[d] == 0) {
    fail<ValueError>("{}: cannot take the max of an empty dimension {} (input {})", name, dim, to_string(in));
  }
  return reduction(in, {dim}, keepdim, name);
}

Reduction reduction_of(const TensorMeta& in, const Attrs& a, const char* name) {
  return reduction(in.shape, a.ints("dims"), a.b("keepdim"), name);
}

// n inputs reduced to m results: n - m adds (or comparisons) in trees of
// n / m terms, plus `per_result` flops on each result (mean's scaling).
CostFn reduce_cost(double per_result) {
  return [per_result](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    const double n = static_cast<double>(numel(in[0].shape)), m = static_cast<double>(numel(out[0].shape));
    double bytes = 0;
    for (const TensorMeta& t : in) bytes += bytes_of(t);
    for (const TensorMeta& t : out) bytes += bytes_of(t);
    return Cost{n - m + per_result * m, bytes, log2_depth(m > 0 ? n / m : 1) + (per_result > 0 ? 1 : 0)};
  };
}

// The gradient of a (scaled) sum: g broadcast back over the reduced dims, in
// fresh memory (one pass).
Tensor sum_grad(const GradArgs& g, const char* name, double scale) {
  const Reduction r = reduction_of(g.input_meta[0], g.attrs, name);
  const Tensor gs = scale == 1 ? g.grad : mul(g.grad, scale);
  return contiguous(expand(reshape(gs, r.keep), g.input_meta[0].shape));
}

// mean's factor: 1/n, NaN for an empty reduction (as PyTorch).
double mean_scale(const Shape& in, const Attrs& a) {
  const int64_t n = reduction(in, a.ints("dims"), a.b("keepdim"), "mean").count;
  return n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

// max/argmax keep their dim's position for the gradient.
int64_t max_dim_of(const TensorMeta& in, const Attrs& a) {
  return in.shape.empty() ? 0 : wrap_dim(a.i("dim"), static_cast<int64_t>(in.shape.size()), "max");
}

}  // namespace

void define_reduce_ops(const Definer& define) {
  // Attributes dims (the reduced dims; negative count from the end) and keepdim.
  define({.name = "sum", .family = "reduce", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{reduction_of(in[0], a, "sum").out, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kArith, [](const Args& a) {
            return Outputs{cpu::sum(a.inputs[0], a.attrs.ints("dims"), a.attrs.b("keepdim"), 1.0, "sum")};
          })},
          .backward = [](const GradArgs& g) { return Grads{sum_grad(g, "sum", 1.0)}; },
          .cost = reduce_cost(0)});
  define({.name = "mean", .family = "reduce", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{reduction_of(in[0], a, "mean").out, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            return Outputs{cpu::sum(x, a.attrs.ints("dims"), a.attrs.b("keepdim"), mean_scale(x.shape(), a.attrs), "mean")};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{sum_grad(g, "mean", mean_scale(g.input_meta[0].shape, g.attrs))};
          },
          .cost = reduce_cost(1)});

  // Along one dim (attributes dim, keepdim): the values and the i64 position
  // of each first maximum (NaN wins, as torch.max). The gradient goes to that
  // position.
  define({.name = "max", .family = "reduce", .inputs = 1, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Shape out = reduction_of_one(in[0].shape, a.i("dim"), a.b("keepdim"), "max").out;
            return Metas{{out, in[0].dtype}, {out, DType::i64}};
          },
          .kernels = {cpu_kernel(kArith, [](const Args& a) {
            cpu::MaxResult r = cpu::max_dim(a.inputs[0], a.attrs.i("dim"), a.attrs.b("keepdim"), "max");
            return Outputs{r.values, r.indices};
          })},
          .backward = [](const GradArgs& g) {
            const TensorMeta& in = g.input_meta[0];
            const Shape keep = reduction(in.shape, {g.attrs.i("dim")}, true, "max").keep;
            return Grads{gather_backward(reshape(g.grad, keep), max_dim_of(in, g.attrs), reshape(g.outputs[1], keep),
                                         in.shape)};
          },
          .save_outputs = 0b10,
          .cost = reduce_cost(0)});
  define({.name = "argmax", .family = "reduce", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{reduction_of_one(in[0].shape, a.i("dim"), a.b("keepdim"), "argmax").out, DType::i64}};
          },
          .kernels = {cpu_kernel(kArith, [](const Args& a) {
            return Outputs{cpu::max_dim(a.inputs[0], a.attrs.i("dim"), a.attrs.b("keepdim"), "argmax").indices};
          })},
          .cost = reduce_cost(0)});
}

}  // namespace op

// ---- the eager functions ----

namespace {

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

op::Attrs dims_attrs(const std::vector<int64_t>& dims, bool keepdim) {
  return {{"dims", dims}, {"keepdim", int64_t{keepdim}}};
}

op::Attrs dim_attrs(int64_t dim, bool keepdim) { return {{"dim", dim}, {"keepdim", int64_t{keepdim}}}; }

}  // namespace

Tensor sum(const Tensor& x) { return sum(x, all_dims(x), false); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return op::call1(BRAID_OP("sum"), {x}, dims_attrs(dims, keepdim));
}

Tensor mean(const Tensor& x) { return mean(x, all_dims(x), false); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return op::call1(BRAID_OP("mean"), {x}, dims_attrs(dims, keepdim));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_or_all, bool unbiased, bool keepdim) {
  const std::vector<int64_t> dims = dims_or_all.empty() ? all_dims(x) : dims_or_all;
  // Composite of primitives (docs/design.md, "Composite ops are written in
  // primitives"): sum((x - mean)^2) / (n - correction).
  const int64_t n = op::reduction(x.shape(), dims, keepdim, "var").count;
  const Tensor centered = sub(x, mean(x, dims, true));
  const double denom = static_cast<double>(n - (unbiased ? 1 : 0));
  return div(sum(mul(centered, centered), dims, keepdim), denom);
}

MaxResult max(const Tensor& x, int64_t dim, bool keepdim) {
  std::vector<Tensor> r = op::call(BRAID_OP("max"), {x}, dim_attrs(dim, keepdim));
  return {std::move(r[0]), std::move(r[1])};
}

Tensor max(const Tensor& x) { return reshape(max(reshape(x, {-1}), 0, false).values, {}); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return op::call1(BRAID_OP("argmax"), {x}, dim_attrs(dim, keepdim));
}

Tensor argmax(const Tensor& x) { return reshape(argmax(reshape(x, {-1}), 0, false), {}); }

}  // namespace braid
