#include "braid/ops/grouped_gemm.h"

#include <algorithm>
#include <numeric>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/tensor/cpu/gemm.h"

namespace braid {

namespace {

using op::Cost;
using op::Metas;
using op::TensorMeta;

// Rows per task: about four tasks per thread over all groups, at least 16
// rows so each BLAS call still amortises its set-up.
int64_t tile_rows(int64_t rows) {
  const int64_t tasks = 4 * static_cast<int64_t>(std::max(1, num_threads()));
  return std::max<int64_t>(16, (rows + tasks - 1) / tasks);
}

int64_t check_counts(const std::vector<int64_t>& counts, int64_t rows, int64_t groups, const char* op) {
  if (static_cast<int64_t>(counts.size()) != groups) {
    fail<ValueError>("{}: {} counts for {} groups", op, counts.size(), groups);
  }
  int64_t total = 0;
  for (const int64_t c : counts) {
    if (c < 0) fail<ValueError>("{}: a negative count {}", op, c);
    total += c;
  }
  if (total != rows) fail<ValueError>("{}: counts sum to {}, the input has {} rows", op, total, rows);
  return total;
}

// [N, K] x [G, M, K] (or [G, K, M]) -> [N, M].
TensorMeta infer_forward(std::span<const TensorMeta> in, const op::Attrs& a) {
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  const bool t = a.b("transpose_w");
  if (x.size() != 2 || w.size() != 3 || in[0].dtype != in[1].dtype || (t ? w[2] : w[1]) != x[1]) {
    fail<ValueError>("grouped_gemm: x [N, K] and w [G, {}] of one dtype, got {} {} and {} {}",
                     t ? "M, K" : "K, M", name(in[0].dtype), to_string(x), name(in[1].dtype), to_string(w));
  }
  check_counts(a.ints("counts"), x[0], w[0], "grouped_gemm");
  return {{x[0], t ? w[1] : w[2]}, in[0].dtype};
}

TensorMeta infer_weight(std::span<const TensorMeta> in, const op::Attrs& a) {
  const Shape& x = in[0].shape;
  const Shape& y = in[1].shape;
  if (x.size() != 2 || y.size() != 2 || x[0] != y[0] || in[0].dtype != in[1].dtype) {
    fail<ValueError>("grouped_gemm_weight: a [N, P] and b [N, Q] of one dtype, got {} {} and {} {}",
                     name(in[0].dtype), to_string(x), name(in[1].dtype), to_string(y));
  }
  const auto& counts = a.ints("counts");
  check_counts(counts, x[0], static_cast<int64_t>(counts.size()), "grouped_gemm_weight");
  return {{static_cast<int64_t>(counts.size()), x[1], y[1]}, in[0].dtype};
}

template <class T>
void forward_kernel(const Tensor& x, const Tensor& w, Tensor& y, const std::vector<int64_t>& counts, bool t) {
  const int64_t k = x.size(1), m = y.size(1), tile = tile_rows(x.size(0));
  struct Task {
    int64_t group, row, rows;
  };
  std::vector<Task> tasks;
  int64_t row = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    for (int64_t r = 0; r < counts[g]; r += tile) {
      tasks.push_back({static_cast<int64_t>(g), row + r, std::min(tile, counts[g] - r)});
    }
    row += counts[g];
  }
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  T* yp = y.data<T>();
  parallel_for(0, static_cast<int64_t>(tasks.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const Task& s = tasks[static_cast<size_t>(i)];
      // OpenBLAS runs single-threaded inside the pool's parallel region.
      cpu::gemm(false, t, s.rows, m, k, T{1}, xp + s.row * k, k, wp + s.group * m * k, t ? k : m, T{0},
                yp + s.row * m, m, cpu::GemmBackend::openblas);
    }
  });
}

template <class T>
void weight_kernel(const Tensor& a, const Tensor& b, Tensor& out, const std::vector<int64_t>& counts) {
  const int64_t p = a.size(1), q = b.size(1);
  // Tasks split each group's output by columns, so no two tasks sum into one element.
  const int64_t groups = static_cast<int64_t>(counts.size());
  const int64_t per_group = std::max<int64_t>(1, (4 * num_threads() + groups - 1) / std::max<int64_t>(groups, 1));
  const int64_t cols = std::max<int64_t>(16, (q + per_group - 1) / per_group);
  std::vector<int64_t> start(counts.size(), 0);
  for (size_t g = 1; g < counts.size(); ++g) start[g] = start[g - 1] + counts[g - 1];
  const int64_t col_tiles = (q + cols - 1) / cols;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* op_ = out.data<T>();
  parallel_for(0, groups * col_tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t g = i / col_tiles, c0 = (i % col_tiles) * cols, n = counts[static_cast<size_t>(g)];
      if (n == 0) continue;  // out is zeros
      const int64_t r0 = start[static_cast<size_t>(g)];
      cpu::gemm(true, false, p, std::min(cols, q - c0), n, T{1}, ap + r0 * p, p, bp + r0 * q + c0, q, T{0},
                op_ + g * p * q + c0, q, cpu::GemmBackend::openblas);
    }
  });
}

template <class Fn>
void dispatch_real(DType d, Fn&& fn) {
  if (d == DType::f64) return fn(double{});
  return fn(float{});
}

Cost gemm_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, double flops) {
  Cost c{flops, 0, 0};
  for (const TensorMeta& m : in) c.bytes += op::bytes_of(m);
  for (const TensorMeta& m : out) c.bytes += op::bytes_of(m);
  return c;
}

}  // namespace

Tensor grouped_gemm(const Tensor& x, const Tensor& w, const std::vector<int64_t>& counts, bool transpose_w) {
  return op::call1(BRAID_OP("grouped_gemm"), {x, w},
                   {{"counts", counts}, {"transpose_w", int64_t{transpose_w}}});
}

Tensor grouped_gemm_weight(const Tensor& a, const Tensor& b, const std::vector<int64_t>& counts) {
  return op::call1(BRAID_OP("grouped_gemm_weight"), {a, b}, {{"counts", counts}});
}

namespace op {

void define_grouped_gemm_ops(const Definer& define) {
  define({.name = "grouped_gemm", .family = "matmul", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) { return Metas{infer_forward(in, a)}; },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const TensorMeta m = infer_forward(std::vector<TensorMeta>{meta_of(a.inputs[0]), meta_of(a.inputs[1])},
                                               a.attrs);
            const Tensor x = a.inputs[0].contiguous(), w = a.inputs[1].contiguous();
            Tensor y = Tensor::empty(m.shape, m.dtype);
            dispatch_real(m.dtype, [&](auto zero) {
              forward_kernel<decltype(zero)>(x, w, y, a.attrs.ints("counts"), a.attrs.b("transpose_w"));
            });
            return Outputs{y};
          })},
          .backward = [](const GradArgs& g) {
            const auto& counts = g.attrs.ints("counts");
            const bool t = g.attrs.b("transpose_w");
            Tensor dx, dw;
            if (g.needs(0)) dx = grouped_gemm(g.grad, g.inputs[1], counts, !t);
            if (g.needs(1)) dw = t ? grouped_gemm_weight(g.grad, g.inputs[0], counts)
                                   : grouped_gemm_weight(g.inputs[0], g.grad, counts);
            return Grads{dx, dw};
          },
          .save_inputs = 0b11,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return gemm_cost(in, out, 2.0 * static_cast<double>(numel(out[0].shape) * in[0].shape[1]));
          }});

  define({.name = "grouped_gemm_weight", .family = "matmul", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) { return Metas{infer_weight(in, a)}; },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const TensorMeta m = infer_weight(std::vector<TensorMeta>{meta_of(a.inputs[0]), meta_of(a.inputs[1])},
                                              a.attrs);
            const Tensor x = a.inputs[0].contiguous(), y = a.inputs[1].contiguous();
            Tensor out = Tensor::zeros(m.shape, m.dtype);
            dispatch_real(m.dtype, [&](auto zero) { weight_kernel<decltype(zero)>(x, y, out, a.attrs.ints("counts")); });
            return Outputs{out};
          })},
          // out_g = a_g^T b_g: da_g = b_g dout_g^T, db_g = a_g dout_g.
          .backward = [](const GradArgs& g) {
            const auto& counts = g.attrs.ints("counts");
            return Grads{g.needs(0) ? grouped_gemm(g.inputs[1], g.grad, counts, true) : Tensor(),
                         g.needs(1) ? grouped_gemm(g.inputs[0], g.grad, counts, false) : Tensor()};
          },
          .save_inputs = 0b11,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return gemm_cost(in, out, 2.0 * static_cast<double>(in[0].shape[0] * in[0].shape[1] * in[1].shape[1]));
          }});
}

}  // namespace op

}  // namespace braid
