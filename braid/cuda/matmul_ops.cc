// CUDA kernels of the matmul and linear families (braid/ops/matmul.cc,
// linear.cc) over blas.h: the CPU kernels' layouts (views whose last two dims
// are row-major or transposed go to cuBLAS without a copy), broadcast and
// summed batches, and dtype rules (bf16 products return f32), plus f16
// products (f16 results, f32 accumulation). The inputs are checked by the
// op's own inference rule, so errors read exactly as the CPU kernels' do.
#include <algorithm>

#include "braid/base/error.h"
#include "braid/cuda/blas.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/matmul_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// The last two dims of t (2-D or 3-D) as a cuBLAS factor, copied only when no
// BLAS layout fits (as detail::mat_operand does for the CPU); `transpose`
// yields op(X) = X^T of t's matrices.
struct Factor {
  blas::Operand op;
  Tensor keep;  // owns the copy when t had to be made contiguous
};

Factor factor(const Tensor& t, bool transpose = false) {
  const int64_t nd = t.ndim();
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t s0 = t.strides()[nd - 2], s1 = t.strides()[nd - 1];
  Factor f;
  Tensor src = t;
  if ((s1 == 1 || cols == 1) && (rows == 1 || s0 >= std::max<int64_t>(1, cols))) {
    f.op.ld = rows == 1 ? std::max<int64_t>(1, cols) : s0;  // row-major rows s0 apart
  } else if ((s0 == 1 || rows == 1) && (cols == 1 || s1 >= std::max<int64_t>(1, rows))) {
    f.op.trans = true;  // a transposed view: columns are contiguous
    f.op.ld = cols == 1 ? std::max<int64_t>(1, rows) : s1;
  } else {
    src = t.contiguous();
    f.keep = src;
    f.op.ld = std::max<int64_t>(1, cols);
  }
  f.op.data = src.raw_data();
  f.op.batch_stride = (nd == 3 && t.size(0) > 1) ? src.strides()[0] : 0;
  if (transpose) f.op.trans = !f.op.trans;
  return f;
}

// C[t] = op(A[t]) op(B[t]) (+ beta C) for t < batch into c [m, n] rows ldc
// apart, batch items c_batch apart (0: all products summed into one C). One
// GEMM when B is shared and A's matrices stack into rows, or when a sum over
// the batch is one product over the stacked inner dimension; else one
// strided-batched call, or for a summed C one call per item (beta 1 after the
// first), as the CPU's batched_gemm.
void batched_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const Factor& fa, const Factor& fb, DType ab,
                  const Tensor& c, int64_t ldc, int64_t c_batch, double beta = 0) {
  const blas::Operand &a = fa.op, &b = fb.op;
  blas::Gemm g{.m = m, .n = n, .k = k, .ab = ab, .c = c.dtype(), .a = a, .b = b, .c_data = c.raw_data(), .ldc = ldc,
               .beta = beta, .device = c.device().index};
  if (batch == 0) {
    if (c.numel() > 0) c.fill(0);  // a sum over no batch items
    return;
  }
  if (batch == 1) return blas::gemm(g);
  if (b.batch_stride == 0 && !a.trans && a.batch_stride == m * a.ld && c_batch == m * ldc) {
    g.m = batch * m;
    return blas::gemm(g);
  }
  if (c_batch == 0 && a.trans && !b.trans && a.batch_stride == k * a.ld && b.batch_stride == k * b.ld) {
    g.k = batch * k;
    return blas::gemm(g);
  }
  if (c_batch != 0) {
    g.batch = batch;
    g.c_batch_stride = c_batch;
    return blas::gemm(g);
  }
  const int64_t item = static_cast<int64_t>(itemsize(ab));
  for (int64_t t = 0; t < batch; ++t) {
    g.a.data = static_cast<const char*>(a.data) + t * a.batch_stride * item;
    g.b.data = static_cast<const char*>(b.data) + t * b.batch_stride * item;
    g.beta = t == 0 ? beta : 1.0;
    blas::gemm(g);
  }
}

Tensor matmul_forward(const Args& a) {
  const op::TensorMeta out = infer("matmul", a)[0];
  const Tensor &x = a.inputs[0], &y = a.inputs[1];
  const int64_t batch = out.shape.size() == 3 ? out.shape[0] : 1;
  const int64_t m = x.size(-2), n = y.size(-1), k = x.size(-1);
  Tensor c = empty_on(x, out.shape, out.dtype);
  batched_gemm(batch, m, n, k, factor(x), factor(y), x.dtype(), c, std::max<int64_t>(1, n), m * n);
  return c;
}

// dA[t] = G[t] B[t]^T, summed over t where A was broadcast over the batch.
Tensor matmul_grad_a(const Args& a) {
  const op::TensorMeta out = infer("matmul_backward_a", a)[0];
  const Tensor &g = a.inputs[0], &b = a.inputs[1];
  const Shape& shape = a.attrs.ints("shape");
  const int64_t batch = g.ndim() == 3 ? g.size(0) : 1, m = g.size(-2), n = g.size(-1), k = b.size(-2);
  const bool summed = shape.size() == 2 || shape[0] == 1;
  Tensor da = empty_on(g, out.shape, out.dtype);
  batched_gemm(batch, m, k, n, factor(g), factor(b, true), g.dtype(), da, std::max<int64_t>(1, k), summed ? 0 : m * k);
  return da;
}

// dB[t] = A[t]^T G[t], summed over t where B was broadcast.
Tensor matmul_grad_b(const Args& a) {
  const op::TensorMeta out = infer("matmul_backward_b", a)[0];
  const Tensor &x = a.inputs[0], &g = a.inputs[1];
  const Shape& shape = a.attrs.ints("shape");
  const int64_t batch = g.ndim() == 3 ? g.size(0) : 1, m = g.size(-2), n = g.size(-1), k = x.size(-1);
  const bool summed = shape.size() == 2 || shape[0] == 1;
  Tensor db = empty_on(g, out.shape, out.dtype);
  batched_gemm(batch, k, n, m, factor(x, true), factor(g), g.dtype(), db, std::max<int64_t>(1, n), summed ? 0 : k * n);
  return db;
}

// x as a [rows, in] matrix (a view when the leading dims collapse, else a copy).
Tensor as_rows(const Tensor& x) {
  if (x.ndim() == 2) return x;
  Tensor c = x.contiguous();
  const int64_t in = x.size(-1);
  const int64_t rows = in == 0 ? 0 : x.numel() / in;
  return c.as_strided({rows, in}, {in, 1}, c.offset());
}

// y = x w^T + b: the bias is copied into every row of y (converted to y's
// dtype), then one GEMM adds x w^T with beta 1, as the CPU kernel does.
Tensor linear_forward(const Args& a) {
  const op::TensorMeta out = infer("linear", a)[0];
  const Tensor &x = a.inputs[0], &w = a.inputs[1], &b = a.inputs[2];
  const Tensor x2 = as_rows(x);
  const int64_t in = x2.size(1), outs = w.size(0);
  Tensor y = empty_on(x, out.shape, out.dtype);
  if (y.numel() == 0) return y;
  const int64_t rows = y.numel() / outs;  // as_rows gives none when in is 0; y = b then
  const Tensor y2 = y.as_strided({rows, outs}, {outs, 1}, y.offset());
  double beta = 0;
  if (b.defined()) {
    y2.copy_from(b.as_strided({rows, outs}, {0, b.strides()[0]}, b.offset()));
    beta = 1;
  }
  batched_gemm(1, rows, outs, in, factor(x2), factor(w, true), x.dtype(), y2, std::max<int64_t>(1, outs), 0, beta);
  return y;
}

// g [..., out] -> db [out], in g's dtype (sums in f32, f64 for f64).
Tensor linear_bias_grad(const Args& a) {
  infer("linear_backward_bias", a);
  const Tensor g = a.inputs[0].contiguous();
  const int64_t cols = g.size(-1), rows = cols == 0 ? 0 : g.numel() / cols;
  Tensor db = empty_on(g, {cols}, g.dtype());
  if (cols == 0) return db;
  const int64_t chunks = channel_sum_chunks(rows, cols, 1);
  const Tensor partial = empty_on(g, {chunks * cols}, g.dtype() == DType::f64 ? DType::f64 : DType::f32);
  channel_sum(g.dtype(), db.raw_data(), g.raw_data(), rows, cols, 1, partial.raw_data(), chunks);
  return db;
}

}  // namespace

void install_matmul_kernels(const op::KernelAdder& add) {
  add("matmul", cuda_kernel(kFloats, [](const Args& a) { return Outputs{matmul_forward(a)}; }));
  add("matmul_backward_a", cuda_kernel(kFloats, [](const Args& a) { return Outputs{matmul_grad_a(a)}; }));
  add("matmul_backward_b", cuda_kernel(kFloats, [](const Args& a) { return Outputs{matmul_grad_b(a)}; }));
  add("linear", cuda_kernel(kFloats, [](const Args& a) { return Outputs{linear_forward(a)}; }));
  add("linear_backward_bias", cuda_kernel(kFloats, [](const Args& a) { return Outputs{linear_bias_grad(a)}; }));
}

}  // namespace braid::cuda
