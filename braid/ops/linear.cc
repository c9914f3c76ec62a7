#include "braid/ops/linear.h"

#include "braid/base/thread_pool.h"
#include "braid/ops/autocast.h"
#include "braid/ops/define.h"
#include "braid/ops/matmul.h"
#include "braid/ops/shape.h"
#include "braid/ops/tensor_ops.h"

namespace braid {

namespace op {
namespace {

const std::vector<DType> kProduct = {DType::f32, DType::f64, DType::bf16};

// x [..., in], w [out, in] in one dtype; b [out] in that dtype or, for bf16
// products, in f32 (their result's dtype).
void check_linear(const TensorMeta& x, const TensorMeta& w, const TensorMeta& b) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  const DType acc = x.dtype == DType::bf16 ? DType::f32 : x.dtype;
  const bool ok = nd >= 1 && w.shape.size() == 2 && x.shape.back() == w.shape[1] && w.dtype == x.dtype &&
                  (b.absent || (b.shape.size() == 1 && b.shape[0] == w.shape[0] && (b.dtype == x.dtype || b.dtype == acc)));
  if (!ok) {
    fail<ValueError>("linear: x {} ({}), w {} ({}), b {} do not fit y = x w^T + b", to_string(x.shape), name(x.dtype),
                     to_string(w.shape), name(w.dtype), b.absent ? "none" : to_string(b.shape));
  }
}

// x as a [rows, in] matrix (a view when the leading dims collapse, else a copy).
Tensor as_rows(const Tensor& x) {
  if (x.ndim() == 2) return x;
  Tensor c = x.contiguous();
  const int64_t in = x.size(-1);
  const int64_t rows = in == 0 ? 0 : x.numel() / in;
  return c.as_strided({rows, in}, {in, 1}, c.offset());
}

// db[j] = sum_i g[i, j]; g [rows, out] contiguous. Rows outer, columns inner so
// the inner loop vectorises; columns split over the pool when wide.
template <class T>
void column_sum(const T* g, int64_t rows, int64_t cols, T* out) {
  parallel_for(0, cols, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) out[j] = T(0);
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = g + i * cols;
      for (int64_t j = lo; j < hi; ++j) out[j] += row[j];
    }
  });
}

// T: the products' operand type (float, double, or bf16 under autocast);
// x and w are in T, y in detail::Acc<T>. The bias is copied into y first, then
// one GEMM adds x w^T (beta = 1).
template <class T>
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  using A = detail::Acc<T>;
  const Tensor x2 = as_rows(x);
  const int64_t rows = x2.size(0), in = x2.size(1), out = w.size(0);
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = Tensor::empty(out_shape, dtype_of<A>());
  A* py = y.data<A>();
  A beta = A(0);
  if (b.defined()) {
    const Tensor bc = b.to(dtype_of<A>()).contiguous();
    const A* pb = bc.data<A>();
    for (int64_t i = 0; i < rows; ++i) std::copy(pb, pb + out, py + i * out);
    beta = A(1);
  }
  const auto xo = detail::mat_operand<T>(x2);
  const auto wo = detail::mat_operand<T>(w, /*transpose=*/true);
  cpu::gemm(xo.trans, wo.trans, rows, out, in, A(1), xo.p, xo.ld, wo.p, wo.ld, beta, py, std::max<int64_t>(1, out));
  return y;
}

}  // namespace

void define_linear_ops(const Definer& define) {
  // (x, w, b?) -> y = x w^T + b. The backward: dx = g w and dw = g^T x are
  // matmul ops (in the forward's precision: bf16 operands take one bf16 copy
  // of g), db the column sum of g itself (no rounding in db).
  define({.name = "linear", .family = "linear", .inputs = 3,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_linear(in[0], in[1], in[2]);
            Shape s = in[0].shape;
            s.back() = in[1].shape[0];
            return Metas{{s, in[0].dtype == DType::bf16 ? DType::f32 : in[0].dtype}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            const Tensor &x = a.inputs[0], &w = a.inputs[1], &b = a.inputs[2];
            check_linear(meta_of(x), meta_of(w), meta_of(b));
            switch (x.dtype()) {
              case DType::f32: return Outputs{linear_forward<float>(x, w, b)};
              case DType::f64: return Outputs{linear_forward<double>(x, w, b)};
              default: return Outputs{linear_forward<bf16>(x, w, b)};
            }
          })},
          .backward = [](const GradArgs& g) {
            const Shape& x_shape = g.input_meta[0].shape;
            const int64_t in = x_shape.back(), out = g.input_meta[1].shape[0];
            const int64_t rows = in == 0 ? 0 : numel(x_shape) / in;
            const OpDef& product = BRAID_OP("matmul");
            const Tensor g2 = reshape(cast(g.grad, g.input_meta[0].dtype), {rows, out});
            return Grads{g.needs(0) ? reshape(call1(product, {g2, g.inputs[1]}), x_shape) : Tensor(),
                         g.needs(1) ? call1(product, {transpose(g2, 0, 1), reshape(g.inputs[0], {rows, in})}) : Tensor(),
                         g.needs(2) ? call1(BRAID_OP("linear_backward_bias"), {g.grad}) : Tensor()};
          },
          .save_inputs = 0b011,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double k = static_cast<double>(in[1].shape[1]), n = static_cast<double>(numel(out[0].shape));
            Cost c{2 * n * k + (in[2].absent ? 0 : n), 0, log2_depth(k) + (in[2].absent ? 0 : 1)};
            for (const TensorMeta& t : in) c.bytes += bytes_of(t);
            c.bytes += bytes_of(out[0]);
            return c;
          }});
  // g [..., out] -> db [out]: linear's bias gradient, a column sum over the rows.
  define({.name = "linear_backward_bias", .family = "linear", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (in[0].shape.empty()) fail<ValueError>("linear_backward_bias: the gradient needs a dimension, got []");
            return Metas{{{in[0].shape.back()}, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& g = a.inputs[0];
            if (g.ndim() == 0) fail<ValueError>("linear_backward_bias: the gradient needs a dimension, got []");
            const Tensor g2 = as_rows(g.contiguous());
            Tensor db = Tensor::empty({g.size(-1)}, g.dtype());
            if (g.dtype() == DType::f32) {
              column_sum<float>(g2.data<float>(), g2.size(0), g2.size(1), db.data<float>());
            } else {
              column_sum<double>(g2.data<double>(), g2.size(0), g2.size(1), db.data<double>());
            }
            return Outputs{db};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double n = static_cast<double>(numel(in[0].shape)), cols = static_cast<double>(numel(out[0].shape));
            return Cost{n, bytes_of(in[0]) + bytes_of(out[0]), log2_depth(cols > 0 ? n / cols : 1)};
          }});
}

}  // namespace op

// Under autocast the products see bf16 copies of x and w (the `cast` op),
// which the backward reuses; the bias stays f32. f16 autocast copies the bias
// too (f16 products take one dtype) and widens y to f32 (autocast.h).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::check_float("linear", x);
  op::check_linear(op::meta_of(x), op::meta_of(w), op::meta_of(b));
  if (autocast_f16("linear", x)) return autocast_f16_call(BRAID_OP("linear"), {x, w, b}, {});
  if (autocast_bf16(x)) return op::call1(BRAID_OP("linear"), {cast(x, DType::bf16), cast(w, DType::bf16), b});
  return op::call1(BRAID_OP("linear"), {x, w, b});
}

}  // namespace braid
