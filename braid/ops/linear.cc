#include "braid/ops/linear.h"

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
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

template <class T>
Tensor linear_forward(const Tensor& x2, const Tensor& w, const Tensor& b, Shape out_shape) {
  const int64_t rows = x2.size(0), in = x2.size(1), out = w.size(0);
  Tensor y = Tensor::empty(out_shape, x2.dtype());
  T* py = y.data<T>();
  T beta = T(0);
  if (b.defined()) {
    Tensor bc = b.contiguous();
    const T* pb = bc.data<T>();
    for (int64_t i = 0; i < rows; ++i) std::copy(pb, pb + out, py + i * out);
    beta = T(1);
  }
  const auto xo = detail::mat_operand<T>(x2);
  const auto wo = detail::mat_operand<T>(w, /*transpose=*/true);
  cpu::gemm(xo.trans, wo.trans, rows, out, in, T(1), xo.p, xo.ld, wo.p, wo.ld, beta, py,
            std::max<int64_t>(1, out));
  return y;
}

template <class T>
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& w,
                                    bool need_x, bool need_w, bool need_b) {
  const int64_t in = w.size(1), out = w.size(0);
  const Tensor g2 = as_rows(g.contiguous());
  const int64_t rows = g2.size(0);
  const auto go = detail::mat_operand<T>(g2);
  std::vector<Tensor> grads(3);
  if (need_x) {  // dx [rows, in] = g [rows, out] w [out, in]
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    const auto wo = detail::mat_operand<T>(w);
    cpu::gemm(go.trans, wo.trans, rows, in, out, T(1), go.p, go.ld, wo.p, wo.ld, T(0),
              dx.data<T>(), std::max<int64_t>(1, in));
    grads[0] = dx;
  }
  if (need_w) {  // dw [out, in] = g^T [out, rows] x [rows, in]
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    const auto gt = detail::mat_operand<T>(g2, true);
    const auto xo = detail::mat_operand<T>(as_rows(x));
    cpu::gemm(gt.trans, xo.trans, out, in, rows, T(1), gt.p, gt.ld, xo.p, xo.ld, T(0),
              dw.data<T>(), std::max<int64_t>(1, in));
    grads[1] = dw;
  }
  if (need_b) {
    Tensor db = Tensor::empty({out}, g.dtype());
    column_sum<T>(g2.data<T>(), rows, out, db.data<T>());
    grads[2] = db;
  }
  return grads;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  Shape out_shape = x.shape();
  out_shape.back() = w.size(0);
  const Tensor x2 = as_rows(x);
  const bool f32 = x.dtype() == DType::f32;
  Tensor y = f32 ? linear_forward<float>(x2, w, b, out_shape)
                 : linear_forward<double>(x2, w, b, out_shape);
  autograd::record(
      "linear", {x, w, b}, y,
      [xd = x.detach(), wd = w.detach(), f32, nx = x.requires_grad(), nw = w.requires_grad(),
       nb = b.defined() && b.requires_grad()](const Tensor& g) {
        return f32 ? linear_backward<float>(g, xd, wd, nx, nw, nb)
                   : linear_backward<double>(g, xd, wd, nx, nw, nb);
      });
  return y;
}

}  // namespace braid
