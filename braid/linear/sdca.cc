#include "braid/linear/sdca.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/base/error.h"

namespace braid::linear_model {

namespace {

// Logistic: with a = alpha y in (0, 1), the new a solves
//   log(a / (1 - a)) + y z + (a - a0) q = 0.
// Solved for t = log(a / (1 - a)) rather than for a: with s(t) = 1 / (1 + e^-t),
//   g(t) = t + y z + (s(t) - a0) q,   g'(t) = 1 + q s (1 - s) in [1, 1 + q/4],
// so Newton's steps are well scaled everywhere. In a they were not: from the
// start near the boundary (a0 = 1e-8) the derivative 1/(a(1-a)) is huge and
// each step only multiplied a by about 20: 13 evaluations a call in the first
// epoch on fortunes (a log each), against 5 here (an exp each, one log to
// start). Where a step would leave the bracket of the root found so far, it
// bisects instead, so it converges from anywhere.
double logistic_delta(double y, double alpha, double z, double q) {
  // The ends: s(±35) is 6e-16 from 0 or 1, still a representable a inside (0, 1).
  constexpr double kEdge = 35, kTolerance = 1e-10;
  const double a0 = alpha * y;
  const double c = std::clamp(a0, 1e-12, 1 - 1e-12);
  double t = std::log(c / (1 - c)), lo = -kEdge, hi = kEdge;  // |t| <= 27.7 < kEdge
  double s = 1 / (1 + std::exp(-t));
  for (int it = 0; it < 50; ++it) {
    const double g = t + y * z + (s - a0) * q;
    if (std::abs(g) <= kTolerance) break;
    if (g > 0) hi = t;
    else lo = t;
    double next = t - g / (1 + q * s * (1 - s));
    if (!(next > lo && next < hi)) next = (lo + hi) / 2;
    if (next == t) break;  // the bracket has closed to one double (at an end)
    t = next;
    s = 1 / (1 + std::exp(-t));
  }
  return s * y - alpha;
}

// The logistic conjugate is finite only for a in [0, 1] and its derivative is
// unbounded at the ends: start just inside, as LIBLINEAR's dual solver does.
double start_of(Loss loss, double y) { return loss == Loss::logistic ? 1e-8 * y : 0; }

// -loss*(-alpha): the dual objective's term of one example.
double dual_term(Loss loss, double y, double alpha) {
  const double a = alpha * y;
  switch (loss) {
    case Loss::hinge: return a;
    case Loss::squared_hinge: return a - a * a / 4;
    case Loss::squared: return alpha * y - alpha * alpha / 4;
    case Loss::logistic: {
      auto xlogx = [](double v) { return v > 0 ? v * std::log(v) : 0.0; };
      return -(xlogx(a) + xlogx(1 - a));
    }
  }
  return 0;
}

}  // namespace

std::vector<double> sdca_start(const Problem& p, const Examples& data, std::span<const double> norms, int64_t n,
                               std::span<double> w) {
  const double scale = 1 / (p.reg.l2 * static_cast<double>(n));
  std::vector<double> alpha(static_cast<size_t>(data.size()));
  for (int64_t r = 0; r < data.size(); ++r) {
    alpha[r] = norms[r] == 0 ? 0 : start_of(p.loss, data.y[r]);
    const auto row = data.x.row(r);
    for (size_t k = 0; k < row.index.size(); ++k) w[row.index[k]] += alpha[r] * scale * row.value[k];
  }
  return alpha;
}

double dual_sum(Loss loss, const Examples& data, std::span<const double> alpha) {
  double s = 0;
  for (int64_t r = 0; r < data.size(); ++r) s += dual_term(loss, data.y[r], alpha[r]);
  return s;
}

double sdca_delta(Loss loss, double y, double alpha, double z, double q) {
  switch (loss) {
    case Loss::hinge: {
      const double a = alpha * y;
      const double next = std::clamp(a + (1 - y * z) / q, 0.0, 1.0);
      return next * y - alpha;
    }
    case Loss::squared_hinge: {
      const double a = alpha * y;
      const double d = std::max(-a, (1 - y * z - a / 2) / (q + 0.5));
      return d * y;
    }
    case Loss::squared: return (y - z - alpha / 2) / (q + 0.5);
    case Loss::logistic: return logistic_delta(y, alpha, z, q);
  }
  return 0;
}

void sdca_pass(const Problem& p, const Examples& data, std::span<const double> norms, std::span<const int64_t> rows,
               int64_t n, double sigma, std::span<const double> w, std::span<double> alpha, std::span<double> dw) {
  const double scale = 1 / (p.reg.l2 * static_cast<double>(n));
  for (int64_t r : rows) {
    const double norm = norms[r];
    if (norm == 0) {  // an empty row cannot move w: its alpha goes straight to its own best (q = 0)
      alpha[r] += sdca_delta(p.loss, data.y[r], alpha[r], 0, 0);
      continue;
    }
    const auto row = data.x.row(r);
    double z = 0;
    if (w.empty()) {  // SDCA itself: no base vector to read beside dw
      for (size_t k = 0; k < row.index.size(); ++k) z += row.value[k] * dw[static_cast<size_t>(row.index[k])];
      z *= sigma;
    } else {
      for (size_t k = 0; k < row.index.size(); ++k) {
        const auto j = static_cast<size_t>(row.index[k]);
        z += row.value[k] * (w[j] + sigma * dw[j]);
      }
    }
    const double d = sdca_delta(p.loss, data.y[r], alpha[r], z, sigma * norm * scale);
    if (d == 0) continue;
    alpha[r] += d;
    for (size_t k = 0; k < row.index.size(); ++k) dw[static_cast<size_t>(row.index[k])] += d * scale * row.value[k];
  }
}

Result solve_sdca(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                  const Monitor& monitor) {
  if (p.reg.l2 <= 0 || p.reg.l1 != 0) fail<ConfigError>("sdca needs l2 > 0 and l1 = 0 (the dual exists for L2 only)");
  EpochClock clock(o, p, test, monitor);  // setup is on the clock, as in LIBLINEAR's train()
  const int64_t n = train.size();
  const auto d = static_cast<size_t>(train.x.cols);
  const std::vector<double> norms = train.x.row_norms_squared();
  std::vector<double> w(d, 0.0);
  std::vector<double> alpha = sdca_start(p, train, norms, n, w);
  auto gap_of = [&](double primal) {
    const double dual = dual_sum(p.loss, train, alpha) / static_cast<double>(n) -
                        p.reg.l2 / 2 * std::inner_product(w.begin(), w.end(), w.begin(), 0.0);
    return primal - dual;
  };
  Result result;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<int64_t> order = data::permutation(n, o.seed, epoch_stream(epoch, 0));
    // No base and sigma = 1: the pass reads and moves w itself.
    sdca_pass(p, train, norms, order, n, 1.0, {}, alpha, w);
    clock.pause();
    const double primal = primal_objective(p, train, w);
    if (!clock.end_epoch(epoch, w, primal, gap_of(primal))) break;
  }
  result.w = std::move(w);
  result.history = clock.take_history();
  return result;
}

}  // namespace braid::linear_model
