#include "braid/linear/coordinate_descent.h"

#include <cmath>

#include "braid/base/error.h"
#include "braid/base/rng.h"

namespace braid::linear_model {

double soft_threshold(double v, double t) { return v > t ? v - t : v < -t ? v + t : 0.0; }

Result solve_coordinate_descent(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                                const Monitor& monitor) {
  if (!is_smooth(p.loss)) fail<ConfigError>("coordinate descent needs a smooth loss; use sdca for hinge");
  EpochClock clock(o, p, test, monitor);  // the transpose is on the clock
  const int64_t n = train.size();
  const int64_t d = train.x.cols;
  const auto nn = static_cast<double>(n);
  const SparseMatrix cols = train.x.transpose();
  std::vector<double> curvature(static_cast<size_t>(d));
  for (int64_t j = 0; j < d; ++j) {
    double s = 0;
    for (int64_t k = cols.start[j]; k < cols.start[j + 1]; ++k) s += double{cols.value[k]} * cols.value[k];
    curvature[j] = curvature_bound(p.loss) * s / nn + p.reg.l2;
  }
  std::vector<double> w(static_cast<size_t>(d), 0.0), z(static_cast<size_t>(n), 0.0);
  Generator g(o.seed);
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    for (int64_t step = 0; step < d; ++step) {
      const auto j = static_cast<int64_t>(g.below(static_cast<uint64_t>(d)));
      if (curvature[j] == 0) continue;  // a feature no row has and no l2: w_j stays 0
      double grad = p.reg.l2 * w[j];
      for (int64_t k = cols.start[j]; k < cols.start[j + 1]; ++k) {
        const int32_t r = cols.index[k];
        grad += loss_derivative(p.loss, train.y[r], z[r]) * cols.value[k] / nn;
      }
      const double next = soft_threshold(w[j] - grad / curvature[j], p.reg.l1 / curvature[j]);
      const double delta = next - w[j];
      if (delta == 0) continue;
      w[j] = next;
      for (int64_t k = cols.start[j]; k < cols.start[j + 1]; ++k) z[cols.index[k]] += delta * cols.value[k];
    }
    clock.pause();
    const double primal = loss_sum(p.loss, train.y, z) / nn + regularizer_value(p.reg, w);
    if (!clock.end_epoch(epoch, w, primal)) break;
  }
  return {std::move(w), clock.take_history()};
}

}  // namespace braid::linear_model
