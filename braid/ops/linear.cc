#include "braid/ops/linear.h"

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/autocast.h"
#include "braid/ops/matmul.h"

namespace braid {
namespace {

void check_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::check_float("linear", x);
  const bool ok = x.ndim() >= 1 && w.ndim() == 2 && x.size(-1) == w.size(1) &&
                  w.dtype() == x.dtype() &&
                  (!b.defined() || (b.ndim() == 1 && b.size(0) == w.size(0) && b.dtype() == x.dtype()));
  if (!ok) {
    fail<ValueError>("linear: x {} ({}), w {} ({}), b {} do not fit y = x w^T + b",
                     to_string(x.shape()), name(x.dtype()), to_string(w.shape()), name(w.dtype()),
                     b.defined() ? to_string(b.shape()) : "none");
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
// x and w are in T, b, y and the gradients in detail::Acc<T>.
template <class T>
Tensor linear_forward(const Tensor& x2, const Tensor& w, const Tensor& b, Shape out_shape) {
  using A = detail::Acc<T>;
  const int64_t rows = x2.size(0), in = x2.size(1), out = w.size(0);
  Tensor y = Tensor::empty(out_shape, dtype_of<A>());
  A* py = y.data<A>();
  A beta = A(0);
  if (b.defined()) {
    Tensor bc = b.contiguous();
    const A* pb = bc.data<A>();
    for (int64_t i = 0; i < rows; ++i) std::copy(pb, pb + out, py + i * out);
    beta = A(1);
  }
  const auto xo = detail::mat_operand<T>(x2);
  const auto wo = detail::mat_operand<T>(w, /*transpose=*/true);
  cpu::gemm(xo.trans, wo.trans, rows, out, in, A(1), xo.p, xo.ld, wo.p, wo.ld, beta, py,
            std::max<int64_t>(1, out));
  return y;
}

template <class T>
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& w,
                                    bool need_x, bool need_w, bool need_b) {
  using A = detail::Acc<T>;
  const int64_t in = w.size(1), out = w.size(0);
  const Tensor g2 = as_rows(g.contiguous());
  const Tensor gt2 = g2.to(dtype_of<T>());  // the product's copy of g (bf16 under autocast)
  const int64_t rows = g2.size(0);
  const auto go = detail::mat_operand<T>(gt2);
  std::vector<Tensor> grads(3);
  if (need_x) {  // dx [rows, in] = g [rows, out] w [out, in]
    Tensor dx = Tensor::empty(x.shape(), dtype_of<A>());
    const auto wo = detail::mat_operand<T>(w);
    cpu::gemm(go.trans, wo.trans, rows, in, out, A(1), go.p, go.ld, wo.p, wo.ld, A(0),
              dx.data<A>(), std::max<int64_t>(1, in));
    grads[0] = dx;
  }
  if (need_w) {  // dw [out, in] = g^T [out, rows] x [rows, in]
    Tensor dw = Tensor::empty(w.shape(), dtype_of<A>());
    const auto gt = detail::mat_operand<T>(gt2, true);
    const auto xo = detail::mat_operand<T>(as_rows(x));
    cpu::gemm(gt.trans, xo.trans, out, in, rows, A(1), gt.p, gt.ld, xo.p, xo.ld, A(0),
              dw.data<A>(), std::max<int64_t>(1, in));
    grads[1] = dw;
  }
  if (need_b) {  // from g itself: no rounding in db
    Tensor db = Tensor::empty({out}, g.dtype());
    column_sum<A>(g2.data<A>(), rows, out, db.data<A>());
    grads[2] = db;
  }
  return grads;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  Shape out_shape = x.shape();
  out_shape.back() = w.size(0);
  // Under autocast the products see bf16 copies, which backward reuses.
  const DType dt = autocast_bf16(x) ? DType::bf16 : x.dtype();
  const Tensor xt = x.to(dt), wt = w.to(dt);
  const Tensor x2 = as_rows(xt);
  Tensor y = dt == DType::f32    ? linear_forward<float>(x2, wt, b, out_shape)
             : dt == DType::bf16 ? linear_forward<bf16>(x2, wt, b, out_shape)
                                 : linear_forward<double>(x2, wt, b, out_shape);
  autograd::record(
      "linear", {x, w, b}, y,
      [xd = xt.detach(), wd = wt.detach(), dt, nx = x.requires_grad(), nw = w.requires_grad(),
       nb = b.defined() && b.requires_grad()](const Tensor& g) {
        return dt == DType::f32    ? linear_backward<float>(g, xd, wd, nx, nw, nb)
               : dt == DType::bf16 ? linear_backward<bf16>(g, xd, wd, nx, nw, nb)
                                   : linear_backward<double>(g, xd, wd, nx, nw, nb);
      });
  return y;
}

}  // namespace braid
