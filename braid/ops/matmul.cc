#include "braid/ops/matmul.h"

#include <algorithm>

#include "braid/ops/autocast.h"
#include "braid/ops/define.h"
#include "braid/ops/tensor_ops.h"

namespace braid {
namespace detail {

// Products take f32 and f64 everywhere; f16 and bf16 operands only on a
// device whose kernels take them (the CPU reaches bf16 through autocast).
void check_float(const char* op, const Tensor& t) {
  const bool sixteen = t.dtype() == DType::f16 || t.dtype() == DType::bf16;
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64 && !(sixteen && !t.device().is_cpu() && !t.is_meta())) {
    fail<ValueError>("{}: expected f32 or f64, got {} of shape {}{}", op, name(t.dtype()), to_string(t.shape()),
                     sixteen ? " (16-bit products run on CUDA devices, or on the CPU under autocast)" : "");
  }
}

template <class T>
MatOperand<T> mat_operand(const Tensor& t, bool transpose) {
  const int64_t nd = t.ndim();
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t s0 = t.strides()[nd - 2], s1 = t.strides()[nd - 1];
  MatOperand<T> op;
  Tensor src = t;
  if ((s1 == 1 || cols == 1) && (rows == 1 || s0 >= std::max<int64_t>(1, cols))) {
    op.trans = false;  // row-major rows with stride s0
    op.ld = rows == 1 ? std::max<int64_t>(1, cols) : s0;
  } else if ((s0 == 1 || rows == 1) && (cols == 1 || s1 >= std::max<int64_t>(1, rows))) {
    op.trans = true;  // a transposed view: columns are contiguous
    op.ld = cols == 1 ? std::max<int64_t>(1, rows) : s1;
  } else {
    src = t.contiguous();
    op.keep = src;
    op.trans = false;
    op.ld = std::max<int64_t>(1, cols);
  }
  op.p = src.template data<T>();
  op.batch_stride = (nd == 3 && t.size(0) > 1) ? src.strides()[0] : 0;
  if (transpose) op.trans = !op.trans;
  return op;
}

template <class T>
void batched_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const MatOperand<T>& a,
                  const MatOperand<T>& b, Acc<T> beta, Acc<T>* c, int64_t ldc, int64_t c_batch) {
  using cpu::gemm;
  using A = Acc<T>;
  if (batch == 1) {
    gemm(a.trans, b.trans, m, n, k, A(1), a.p, a.ld, b.p, b.ld, beta, c, ldc);
    return;
  }
  // [batch*m, k] x [k, n]: B shared, A and C batches stacked row after row.
  if (b.batch_stride == 0 && !a.trans && a.batch_stride == m * a.ld && c_batch == m * ldc) {
    gemm(false, b.trans, batch * m, n, k, A(1), a.p, a.ld, b.p, b.ld, beta, c, ldc);
    return;
  }
  // Sum over the batch = one product over the stacked inner dimension:
  // [m, batch*k] x [batch*k, n] with A stored transposed, B row-major.
  if (c_batch == 0 && a.trans && !b.trans && a.batch_stride == k * a.ld &&
      b.batch_stride == k * b.ld) {
    gemm(true, false, m, n, batch * k, A(1), a.p, a.ld, b.p, b.ld, beta, c, ldc);
    return;
  }
  for (int64_t t = 0; t < batch; ++t) {
    const A bt = (t == 0 || c_batch != 0) ? beta : A(1);
    gemm(a.trans, b.trans, m, n, k, A(1), a.p + t * a.batch_stride, a.ld,
         b.p + t * b.batch_stride, b.ld, bt, c + t * c_batch, ldc);
  }
}

template MatOperand<float> mat_operand<float>(const Tensor&, bool);
template MatOperand<double> mat_operand<double>(const Tensor&, bool);
template MatOperand<bf16> mat_operand<bf16>(const Tensor&, bool);
template void batched_gemm<float>(int64_t, int64_t, int64_t, int64_t, const MatOperand<float>&,
                                  const MatOperand<float>&, float, float*, int64_t, int64_t);
template void batched_gemm<double>(int64_t, int64_t, int64_t, int64_t, const MatOperand<double>&,
                                   const MatOperand<double>&, double, double*, int64_t, int64_t);
template void batched_gemm<bf16>(int64_t, int64_t, int64_t, int64_t, const MatOperand<bf16>&,
                                 const MatOperand<bf16>&, float, float*, int64_t, int64_t);

}  // namespace detail

// ---- the ops ----

namespace op {
namespace {

const std::vector<DType> kProduct = {DType::f32, DType::f64, DType::bf16};

// What a product over `operand` returns: f32 for bf16 operands.
DType acc_dtype(DType operand) { return operand == DType::bf16 ? DType::f32 : operand; }

// [batch, m, k] x [batch, k, n]; batched_out when either side is 3-D.
struct MatmulDims {
  int64_t batch, m, n, k;
  bool batched_out;
};

MatmulDims matmul_dims(const TensorMeta& a, const TensorMeta& b) {
  const int64_t ra = static_cast<int64_t>(a.shape.size()), rb = static_cast<int64_t>(b.shape.size());
  const bool ok_rank = (ra == 2 || ra == 3) && (rb == 2 || rb == 3);
  const int64_t ba = ra == 3 ? a.shape[0] : 1, bb = rb == 3 ? b.shape[0] : 1;
  if (!ok_rank || a.dtype != b.dtype || a.shape.back() != b.shape[rb - 2] || (ba != bb && ba != 1 && bb != 1)) {
    fail<ValueError>("matmul: cannot multiply {} ({}) by {} ({})", to_string(a.shape), name(a.dtype),
                     to_string(b.shape), name(b.dtype));
  }
  return {std::max(ba, bb), a.shape[ra - 2], b.shape[rb - 1], a.shape[ra - 1], ra == 3 || rb == 3};
}

template <class Fn>
Tensor dispatch_product(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: return fn(bf16{});
  }
}

// dA[t] = G[t] B[t]^T, summed over t where A was broadcast over the batch
// (one GEMM over the stacked batch when the layout allows).
Tensor matmul_grad_a(const Tensor& g, const Tensor& b, const Shape& a_shape) {
  return dispatch_product(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    using A = detail::Acc<T>;
    const int64_t batch = g.ndim() == 3 ? g.size(0) : 1, m = g.size(-2), n = g.size(-1), k = b.size(-2);
    const bool summed = a_shape.size() == 2 || a_shape[0] == 1;
    Tensor da = Tensor::empty(a_shape, dtype_of<A>());
    detail::batched_gemm<T>(batch, m, k, n, detail::mat_operand<T>(g), detail::mat_operand<T>(b, true), A(0),
                            da.data<A>(), std::max<int64_t>(1, k), summed ? 0 : m * k);
    return da;
  });
}

// dB[t] = A[t]^T G[t], summed over t where B was broadcast.
Tensor matmul_grad_b(const Tensor& a, const Tensor& g, const Shape& b_shape) {
  return dispatch_product(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    using A = detail::Acc<T>;
    const int64_t batch = g.ndim() == 3 ? g.size(0) : 1, m = g.size(-2), n = g.size(-1), k = a.size(-1);
    const bool summed = b_shape.size() == 2 || b_shape[0] == 1;
    Tensor db = Tensor::empty(b_shape, dtype_of<A>());
    detail::batched_gemm<T>(batch, k, n, m, detail::mat_operand<T>(a, true), detail::mat_operand<T>(g), A(0),
                            db.data<A>(), std::max<int64_t>(1, n), summed ? 0 : k * n);
    return db;
  });
}

// The backward products' operands: g [batch?, m, n] against the other factor,
// checked against the attribute "shape" of the factor whose gradient it is.
// Returns the product's dims.
MatmulDims grad_dims(const char* op, const TensorMeta& g, const TensorMeta& other, const Shape& shape, bool for_a) {
  const TensorMeta self{shape, g.dtype};
  const MatmulDims d = for_a ? matmul_dims(self, other) : matmul_dims(other, self);
  const Shape out = d.batched_out ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n};
  if (g.shape != out || g.dtype != other.dtype) {
    fail<ValueError>("{}: gradient {} ({}) does not fit the product of {} and {} ({})", op, to_string(g.shape),
                     name(g.dtype), for_a ? to_string(shape) : to_string(other.shape),
                     for_a ? to_string(other.shape) : to_string(shape), name(other.dtype));
  }
  return d;
}

// A product's cost: 2 m n k flops per batch item, depth of a sum of `terms`
// (k for the forward, n or m for a backward product; times the batch when a
// broadcast operand's gradient sums over it).
Cost product_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const MatmulDims& d, double terms) {
  Cost c{2.0 * static_cast<double>(d.batch) * static_cast<double>(d.m) * static_cast<double>(d.n) *
             static_cast<double>(d.k),
         0, log2_depth(terms)};
  for (const TensorMeta& t : in) c.bytes += bytes_of(t);
  for (const TensorMeta& t : out) c.bytes += bytes_of(t);
  return c;
}

double summed_batch(const Shape& shape, const MatmulDims& d) {
  return shape.size() == 2 || shape[0] == 1 ? static_cast<double>(d.batch) : 1.0;
}

}  // namespace

// The products call these ops directly, never the eager matmul: a backward
// runs in its forward's precision, whatever autocast region is open then.
void define_matmul_ops(const Definer& define) {
  define({.name = "matmul", .family = "matmul", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            const MatmulDims d = matmul_dims(in[0], in[1]);
            const DType out = acc_dtype(in[0].dtype);
            return Metas{{d.batched_out ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n}, out}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            const Tensor &x = a.inputs[0], &y = a.inputs[1];
            const MatmulDims d = matmul_dims(meta_of(x), meta_of(y));
            return Outputs{dispatch_product(x.dtype(), [&](auto zero) {
              using T = decltype(zero);
              using A = detail::Acc<T>;
              Tensor out = Tensor::empty(d.batched_out ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n}, dtype_of<A>());
              detail::batched_gemm<T>(d.batch, d.m, d.n, d.k, detail::mat_operand<T>(x), detail::mat_operand<T>(y),
                                      A(0), out.data<A>(), std::max<int64_t>(1, d.n), d.m * d.n);
              return out;
            })};
          })},
          // bf16 operands (autocast) take one bf16 copy of g for both products.
          .backward = [](const GradArgs& g) {
            const Tensor gt = cast(g.grad, g.input_meta[0].dtype);
            return Grads{g.needs(0) ? call1(BRAID_OP("matmul_backward_a"), {gt, g.inputs[1]},
                                            {{"shape", g.input_meta[0].shape}})
                                    : Tensor(),
                         g.needs(1) ? call1(BRAID_OP("matmul_backward_b"), {g.inputs[0], gt},
                                            {{"shape", g.input_meta[1].shape}})
                                    : Tensor()};
          },
          .save_inputs = 0b11,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const MatmulDims d = matmul_dims(in[0], in[1]);
            return product_cost(in, out, d, static_cast<double>(d.k));
          }});
  // (g, b) -> dA of shape attribute "shape": the gradient of matmul's first factor.
  define({.name = "matmul_backward_a", .family = "matmul", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            grad_dims("matmul_backward_a", in[0], in[1], a.ints("shape"), true);
            return Metas{{a.ints("shape"), acc_dtype(in[0].dtype)}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            grad_dims("matmul_backward_a", meta_of(a.inputs[0]), meta_of(a.inputs[1]), a.attrs.ints("shape"), true);
            return Outputs{matmul_grad_a(a.inputs[0], a.inputs[1], a.attrs.ints("shape"))};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            const MatmulDims d = grad_dims("matmul_backward_a", in[0], in[1], a.ints("shape"), true);
            return product_cost(in, out, d, static_cast<double>(d.n) * summed_batch(a.ints("shape"), d));
          }});
  // (a, g) -> dB of shape attribute "shape": the gradient of matmul's second factor.
  define({.name = "matmul_backward_b", .family = "matmul", .inputs = 2, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            grad_dims("matmul_backward_b", in[1], in[0], a.ints("shape"), false);
            return Metas{{a.ints("shape"), acc_dtype(in[1].dtype)}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            grad_dims("matmul_backward_b", meta_of(a.inputs[1]), meta_of(a.inputs[0]), a.attrs.ints("shape"), false);
            return Outputs{matmul_grad_b(a.inputs[0], a.inputs[1], a.attrs.ints("shape"))};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            const MatmulDims d = grad_dims("matmul_backward_b", in[1], in[0], a.ints("shape"), false);
            return product_cost(in, out, d, static_cast<double>(d.m) * summed_batch(a.ints("shape"), d));
          }});
}

}  // namespace op

// ---- the eager function ----

// Under autocast the products see bf16 copies (the `cast` op), which the
// backward reuses. (A view's layout is lost in the copy; the copy is contiguous.)
// f16 autocast also widens the f16 result to f32 (autocast.h).
Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_float("matmul", a);
  detail::check_float("matmul", b);
  const op::OpDef& product = BRAID_OP("matmul");
  if (autocast_f16("matmul", a)) {
    op::matmul_dims(op::meta_of(a), op::meta_of(b));  // the error names the inputs, not their copies
    return autocast_f16_call(product, {a, b}, {});
  }
  if (autocast_bf16(a)) {
    op::matmul_dims(op::meta_of(a), op::meta_of(b));  // the error names the inputs, not their copies
    return op::call1(product, {cast(a, DType::bf16), cast(b, DType::bf16)});
  }
  return op::call1(product, {a, b});
}

}  // namespace braid
