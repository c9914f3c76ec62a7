#include "braid/linear/olbfgs.h"

#include <algorithm>
#include <cmath>

#include "braid/base/error.h"
#include "braid/linear/lbfgs.h"

namespace braid::linear_model {

namespace {

// The gradient of (1/|b|) sum_{i in b} loss_i + (l2/2) |w|^2.
void batch_gradient(const Problem& p, const Examples& train, std::span<const int64_t> batch,
                    std::span<const double> w, std::span<double> g) {
  for (size_t j = 0; j < g.size(); ++j) g[j] = p.reg.l2 * w[j];
  const double inv = 1 / static_cast<double>(batch.size());
  for (int64_t r : batch) {
    const auto row = train.x.row(r);
    double z = 0;
    for (size_t k = 0; k < row.index.size(); ++k) z += row.value[k] * w[row.index[k]];
    const double d = loss_derivative(p.loss, train.y[r], z) * inv;
    for (size_t k = 0; k < row.index.size(); ++k) g[row.index[k]] += d * row.value[k];
  }
}

}  // namespace

Result solve_olbfgs(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                    const Monitor& monitor) {
  check_lbfgs_problem(p, "olbfgs");
  if (o.step <= 0 || o.batch < 1) fail<ConfigError>("olbfgs needs step > 0 and batch >= 1");
  EpochClock clock(o, p, test, monitor);
  const auto d = static_cast<size_t>(train.x.cols);
  const auto n = static_cast<size_t>(train.size());
  LocalSpace space(p, train);  // dot products only
  std::vector<double> w(d, 0.0), g(d), g_next(d), dir;
  std::deque<CurvaturePair> pairs;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<int64_t> order = data::permutation(train.size(), o.seed, epoch_stream(epoch, 0));
    const double eta = o.step * std::pow(o.step_decay, epoch - 1);
    for (size_t lo = 0; lo < n; lo += static_cast<size_t>(o.batch)) {
      const auto batch = std::span(order).subspan(lo, std::min(n - lo, static_cast<size_t>(o.batch)));
      batch_gradient(p, train, batch, w, g);
      double gamma = 1;
      if (!pairs.empty()) {
        gamma = 0;
        for (const auto& q : pairs) gamma += 1 / (q.rho * space_dot(space, q.y, q.y));
        gamma /= static_cast<double>(pairs.size());
      }
      lbfgs_direction(space, pairs, g, dir, gamma);
      CurvaturePair pair{std::vector<double>(d), std::vector<double>(d), 0};
      for (size_t j = 0; j < d; ++j) pair.s[j] = eta * dir[j], w[j] += pair.s[j];
      batch_gradient(p, train, batch, w, g_next);
      for (size_t j = 0; j < d; ++j) pair.y[j] = g_next[j] - g[j];
      const double sy = space_dot(space, pair.s, pair.y);
      if (sy > 0) {  // l2 > 0 makes the batch objective strongly convex, so this holds but for round-off
        pair.rho = 1 / sy;
        pairs.push_back(std::move(pair));
        if (pairs.size() > static_cast<size_t>(o.history)) pairs.pop_front();
      }
    }
    clock.pause();
    if (!clock.end_epoch(epoch, w, primal_objective(p, train, w))) break;
  }
  return {std::move(w), clock.take_history()};
}

}  // namespace braid::linear_model
