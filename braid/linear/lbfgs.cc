#include "braid/linear/lbfgs.h"

#include <cmath>
#include <deque>

#include "braid/base/error.h"

namespace braid::linear_model {

double space_dot(Space& space, std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return space.sum(s);
}

void lbfgs_direction(Space& space, const std::deque<CurvaturePair>& pairs, std::span<const double> g,
                     std::vector<double>& d, double gamma) {
  d.assign(g.begin(), g.end());
  std::vector<double> a(pairs.size());
  for (size_t k = pairs.size(); k-- > 0;) {
    a[k] = pairs[k].rho * space_dot(space, pairs[k].s, d);
    for (size_t i = 0; i < d.size(); ++i) d[i] -= a[k] * pairs[k].y[i];
  }
  for (double& v : d) v *= gamma;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const double b = pairs[k].rho * space_dot(space, pairs[k].y, d);
    for (size_t i = 0; i < d.size(); ++i) d[i] += (a[k] - b) * pairs[k].s[i];
  }
  for (double& v : d) v = -v;
}

namespace {

double dot(Space& space, std::span<const double> a, std::span<const double> b) { return space_dot(space, a, b); }

// H0 = (s.y / y.y) I of the newest pair (Nocedal & Wright's choice).
void direction(Space& space, const std::deque<CurvaturePair>& pairs, std::span<const double> g, std::vector<double>& d) {
  const double gamma = pairs.empty() ? 1.0 : 1 / (pairs.back().rho * dot(space, pairs.back().y, pairs.back().y));
  lbfgs_direction(space, pairs, g, d, gamma);
}

}  // namespace

void check_lbfgs_problem(const Problem& p, const char* solver) {
  if (!is_smooth(p.loss)) fail<ConfigError>("{} needs a smooth loss; use sdca for hinge", solver);
  if (p.reg.l1 != 0) fail<ConfigError>("{} handles l2 only; use cd for l1 and elastic net", solver);
}

double LocalSpace::evaluate(std::span<const double> w, std::span<double> grad) {
  return smooth_objective(p_, train_, w, grad);
}

std::vector<Progress> run_lbfgs(Space& space, std::vector<double>& w, const SolverOptions& o, EpochClock& clock) {
  const size_t m = space.size();
  w.assign(m, 0.0);
  std::vector<double> g(m), d, w_next(m), g_next(m);
  double f = space.evaluate(w, g);
  std::deque<CurvaturePair> pairs;
  constexpr double kArmijo = 1e-4;
  for (int it = 1; it <= o.epochs; ++it) {
    direction(space, pairs, g, d);
    double slope = dot(space, g, d);
    if (!(slope < 0)) {  // not a descent direction (numerical trouble): restart from steepest descent
      pairs.clear();
      direction(space, pairs, g, d);
      slope = dot(space, g, d);
    }
    // The first step has no curvature estimate: scale it to unit length.
    double step = pairs.empty() ? 1 / std::sqrt(std::max(dot(space, d, d), 1e-300)) : 1.0;
    double f_next = f;
    bool moved = false;
    for (int trial = 0; trial < 40; ++trial) {
      for (size_t i = 0; i < m; ++i) w_next[i] = w[i] + step * d[i];
      f_next = space.evaluate(w_next, g_next);
      if (f_next <= f + kArmijo * step * slope) {
        moved = true;
        break;
      }
      step /= 2;
    }
    if (!moved) {  // no decrease left at machine precision: w is as good as it gets
      clock.pause();
      clock.end_epoch(it, space.gather(w), f);
      break;
    }
    CurvaturePair pair{std::vector<double>(m), std::vector<double>(m), 0};
    for (size_t i = 0; i < m; ++i) pair.s[i] = w_next[i] - w[i], pair.y[i] = g_next[i] - g[i];
    const double sy = dot(space, pair.s, pair.y);
    w.swap(w_next);
    g.swap(g_next);
    f = f_next;
    if (sy > 1e-12 * std::sqrt(dot(space, pair.s, pair.s) * dot(space, pair.y, pair.y))) {
      pair.rho = 1 / sy;
      pairs.push_back(std::move(pair));
      if (pairs.size() > static_cast<size_t>(o.history)) pairs.pop_front();
    }
    clock.pause();
    if (!clock.end_epoch(it, space.gather(w), f)) break;
  }
  return clock.take_history();
}

Result solve_in_space(Space& space, EpochClock& clock, const SolverOptions& o) {
  Result r;
  std::vector<double> owned;
  r.history = run_lbfgs(space, owned, o, clock);
  r.w = space.gather(owned);
  return r;
}

Result solve_lbfgs(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                   const Monitor& monitor) {
  check_lbfgs_problem(p, "lbfgs");
  EpochClock clock(o, p, test, monitor);
  LocalSpace space(p, train);
  return solve_in_space(space, clock, o);
}

}  // namespace braid::linear_model
