#include "braid/ops/matmul.h"

#include <algorithm>

#include "braid/autograd/node.h"
#include "braid/ops/autocast.h"

namespace braid {
namespace detail {

void check_float(const char* op, const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) {
    fail<ValueError>("{}: expected f32 or f64, got {} of shape {}", op, name(t.dtype()),
                     to_string(t.shape()));
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

namespace {

struct MatmulDims {
  int64_t batch, m, n, k;
  bool batched_out;
};

MatmulDims matmul_dims(const Tensor& a, const Tensor& b) {
  detail::check_float("matmul", a);
  detail::check_float("matmul", b);
  const bool ok_rank = (a.ndim() == 2 || a.ndim() == 3) && (b.ndim() == 2 || b.ndim() == 3);
  const int64_t ba = a.ndim() == 3 ? a.size(0) : 1, bb = b.ndim() == 3 ? b.size(0) : 1;
  if (!ok_rank || a.dtype() != b.dtype() || a.size(-1) != b.size(-2) ||
      (ba != bb && ba != 1 && bb != 1)) {
    fail<ValueError>("matmul: cannot multiply {} ({}) by {} ({})", to_string(a.shape()),
                     name(a.dtype()), to_string(b.shape()), name(b.dtype()));
  }
  return {std::max(ba, bb), a.size(-2), b.size(-1), a.size(-1), a.ndim() == 3 || b.ndim() == 3};
}

// T: the operand type (a and b are in T); results are in detail::Acc<T>.
template <class T>
Tensor matmul_forward(const Tensor& a, const Tensor& b, const MatmulDims& d) {
  using A = detail::Acc<T>;
  Tensor out = d.batched_out ? Tensor::empty({d.batch, d.m, d.n}, dtype_of<A>())
                             : Tensor::empty({d.m, d.n}, dtype_of<A>());
  detail::batched_gemm<T>(d.batch, d.m, d.n, d.k, detail::mat_operand<T>(a),
                          detail::mat_operand<T>(b), A(0), out.data<A>(), std::max<int64_t>(1, d.n),
                          d.m * d.n);
  return out;
}

// dA[t] = G[t] B[t]^T, dB[t] = A[t]^T G[t]; summed over t where the input was
// broadcast over the batch.
template <class T>
std::vector<Tensor> matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b,
                                    const MatmulDims& d, bool need_a, bool need_b) {
  using A = detail::Acc<T>;
  std::vector<Tensor> grads(2);
  const Tensor gt = g.to(dtype_of<T>());  // the product's copy of g (bf16 under autocast)
  const auto go = detail::mat_operand<T>(gt);
  if (need_a) {
    Tensor da = Tensor::empty(a.shape(), dtype_of<A>());
    const bool summed = a.ndim() == 2 || a.size(0) == 1;
    detail::batched_gemm<T>(d.batch, d.m, d.k, d.n, go, detail::mat_operand<T>(b, true), A(0),
                            da.data<A>(), std::max<int64_t>(1, d.k), summed ? 0 : d.m * d.k);
    grads[0] = da;
  }
  if (need_b) {
    Tensor db = Tensor::empty(b.shape(), dtype_of<A>());
    const bool summed = b.ndim() == 2 || b.size(0) == 1;
    detail::batched_gemm<T>(d.batch, d.k, d.n, d.m, detail::mat_operand<T>(a, true), go, A(0),
                            db.data<A>(), std::max<int64_t>(1, d.n), summed ? 0 : d.k * d.n);
    grads[1] = db;
  }
  return grads;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const MatmulDims d = matmul_dims(a, b);
  // Under autocast the products see bf16 copies, which backward reuses. (A
  // view's layout is lost in the copy; the copy is contiguous.)
  const DType dt = autocast_bf16(a) ? DType::bf16 : a.dtype();
  const Tensor at = a.to(dt), bt = b.to(dt);
  Tensor out = dt == DType::f32    ? matmul_forward<float>(at, bt, d)
               : dt == DType::bf16 ? matmul_forward<bf16>(at, bt, d)
                                   : matmul_forward<double>(at, bt, d);
  autograd::record("matmul", {a, b}, out,
                   [ad = at.detach(), bd = bt.detach(), d, dt, need_a = a.requires_grad(),
                    need_b = b.requires_grad()](const Tensor& g) {
                     return dt == DType::f32    ? matmul_backward<float>(g, ad, bd, d, need_a, need_b)
                            : dt == DType::bf16 ? matmul_backward<bf16>(g, ad, bd, d, need_a, need_b)
                                                : matmul_backward<double>(g, ad, bd, d, need_a, need_b);
                   });
  return out;
}

}  // namespace braid
