#include "braid/optim/lbfgs.h"

#include <algorithm>
#include <cmath>


namespace braid::optim {

namespace {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double max_abs(const Vec& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}

// Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to
// bounds (default: the interval between x1 and x2); the midpoint when the
// cubic has no real minimiser.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, const double* bounds) {
  const double lo = bounds ? bounds[0] : std::min(x1, x2);
  const double hi = bounds ? bounds[1] : std::max(x1, x2);
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_sq = d1 * d1 - g1 * g2;
  if (d2_sq < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_sq);
  const double pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                              : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(pos, lo), hi);
}

}  // namespace

LBFGS::LBFGS(std::vector<Tensor> params, std::function<double()> closure, LBFGSOptions options)
    : Optimizer(std::move(params), options.lr), closure_(std::move(closure)), o_(options) {
  if (!closure_) fail<ValueError>("lbfgs: a closure is required");
  if (o_.max_iter <= 0 || o_.history_size <= 0) fail<ValueError>("lbfgs: max_iter and history_size must be > 0");
  if (o_.max_eval <= 0) o_.max_eval = o_.max_iter * 5 / 4;
}

// Parameters and gradients cross to the host through HostStaging: the
// two-loop recursion and the line search run in double on the host whatever
// device the model is on.
Vec LBFGS::flat_grad() const {
  HostStaging host;
  Vec g;
  for (const Tensor& p : params_) {
    Tensor gt = p.grad();
    if (!gt.defined()) {
      g.insert(g.end(), static_cast<size_t>(p.numel()), 0.0);
      continue;
    }
    const float* d = host.grad(p);
    g.insert(g.end(), d, d + p.numel());
  }
  return g;
}

Vec LBFGS::flat_params() const {
  HostStaging host;
  Vec x;
  for (const Tensor& p : params_) {
    const float* d = host.readable(p);
    x.insert(x.end(), d, d + p.numel());
  }
  return x;
}

void LBFGS::set_params(const Vec& x) const {
  HostStaging host;
  size_t off = 0;
  for (const Tensor& p : params_) {
    float* d = host.writable(p);
    for (int64_t k = 0; k < p.numel(); ++k) d[k] = static_cast<float>(x[off++]);
  }
  host.write_back();
}

void LBFGS::add_to_params(double t, const Vec& dir) const {
  HostStaging host;
  size_t off = 0;
  for (const Tensor& p : params_) {
    float* d = host.writable(p);
    for (int64_t k = 0; k < p.numel(); ++k) d[k] = static_cast<float>(d[k] + t * dir[off++]);
  }
  host.write_back();
}

std::pair<double, Vec> LBFGS::evaluate_at(const Vec& x, double t, const Vec& d) {
  add_to_params(t, d);
  const double loss = closure_();
  Vec g = flat_grad();
  set_params(x);
  return {loss, std::move(g)};
}

// Strong-Wolfe line search (Nocedal & Wright, algorithms 3.5 and 3.6): bracket
// a step satisfying sufficient decrease (c1) and curvature (c2), then zoom.
LBFGS::SearchResult LBFGS::strong_wolfe(const Vec& x, double t, const Vec& d, double f, const Vec& g, double gtd) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int max_ls = 25;
  const double d_norm = max_abs(d);
  auto [f_new, g_new] = evaluate_at(x, t, d);
  int evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Vec g_prev = g;
  bool done = false;
  int ls_iter = 0;
  double br[2] = {0, 0}, br_f[2] = {0, 0}, br_gtd[2] = {0, 0};
  Vec br_g[2];
  int n_br = 0;
  while (ls_iter < max_ls) {
    const bool no_decrease = f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev);
    if (!no_decrease && std::abs(gtd_new) <= -c2 * gtd) {
      br[0] = t, br_f[0] = f_new, br_g[0] = g_new;
      n_br = 1;
      done = true;
      break;
    }
    if (no_decrease || gtd_new >= 0) {
      br[0] = t_prev, br[1] = t, br_f[0] = f_prev, br_f[1] = f_new;
      br_g[0] = g_prev, br_g[1] = g_new, br_gtd[0] = gtd_prev, br_gtd[1] = gtd_new;
      n_br = 2;
      break;
    }
    const double bounds[2] = {t + 0.01 * (t - t_prev), t * 10};
    const double next = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
    t_prev = t, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
    t = next;
    std::tie(f_new, g_new) = evaluate_at(x, t, d);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) {
    br[0] = 0, br[1] = t, br_f[0] = f, br_f[1] = f_new, br_g[0] = g, br_g[1] = g_new;
    n_br = 2;
  }
  // Zoom: shrink the bracket until the strong-Wolfe conditions hold.
  bool insuf_progress = false;
  int low = br_f[0] <= br_f[n_br - 1] ? 0 : 1, high = 1 - low;
  if (n_br == 1) low = 0;
  while (!done && ls_iter < max_ls) {
    if (std::abs(br[1] - br[0]) * d_norm < o_.tolerance_change) break;
    t = cubic_interpolate(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1], nullptr);
    const double bmax = std::max(br[0], br[1]), bmin = std::min(br[0], br[1]);
    const double eps = 0.1 * (bmax - bmin);
    if (std::min(bmax - t, t - bmin) < eps) {
      if (insuf_progress || t >= bmax || t <= bmin) {
        t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
        insuf_progress = false;
      } else {
        insuf_progress = true;
      }
    } else {
      insuf_progress = false;
    }
    std::tie(f_new, g_new) = evaluate_at(x, t, d);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
    if (f_new > f + c1 * t * gtd || f_new >= br_f[low]) {
      br[high] = t, br_f[high] = f_new, br_g[high] = g_new, br_gtd[high] = gtd_new;
      low = br_f[0] <= br_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (br[high] - br[low]) >= 0) {
        br[high] = br[low], br_f[high] = br_f[low], br_g[high] = br_g[low], br_gtd[high] = br_gtd[low];
      }
      br[low] = t, br_f[low] = f_new, br_g[low] = g_new, br_gtd[low] = gtd_new;
    }
  }
  return {br_f[low], br_g[low], br[low], evals};
}

void LBFGS::step() {
  double loss = closure_();
  last_loss_ = loss;
  int current_evals = 1;
  ++func_evals_;
  Vec g = flat_grad();
  if (max_abs(g) <= o_.tolerance_grad) return;
  for (int it = 1; it <= o_.max_iter; ++it) {
    ++n_iter_;
    if (n_iter_ == 1) {
      d_.resize(g.size());
      for (size_t k = 0; k < g.size(); ++k) d_[k] = -g[k];
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      h_diag_ = 1;
    } else {
      // Two-loop recursion over the (y, s) history.
      Vec y(g.size()), s(g.size());
      for (size_t k = 0; k < g.size(); ++k) y[k] = g[k] - prev_grad_[k], s[k] = d_[k] * t_;
      const double ys = dot(y, s);
      if (ys > 1e-10) {
        if (static_cast<int>(old_dirs_.size()) == o_.history_size) {
          old_dirs_.pop_front(), old_stps_.pop_front(), ro_.pop_front();
        }
        h_diag_ = ys / dot(y, y);
        old_dirs_.push_back(std::move(y)), old_stps_.push_back(std::move(s)), ro_.push_back(1 / ys);
      }
      const size_t m = old_dirs_.size();
      Vec al(m), q(g.size());
      for (size_t k = 0; k < g.size(); ++k) q[k] = -g[k];
      for (size_t i = m; i-- > 0;) {
        al[i] = dot(old_stps_[i], q) * ro_[i];
        for (size_t k = 0; k < q.size(); ++k) q[k] -= al[i] * old_dirs_[i][k];
      }
      for (double& v : q) v *= h_diag_;
      for (size_t i = 0; i < m; ++i) {
        const double be = dot(old_dirs_[i], q) * ro_[i];
        for (size_t k = 0; k < q.size(); ++k) q[k] += (al[i] - be) * old_stps_[i][k];
      }
      d_ = std::move(q);
    }
    prev_grad_ = g;
    prev_loss_ = loss;
    if (n_iter_ == 1) {
      double l1 = 0;
      for (double v : g) l1 += std::abs(v);
      t_ = std::min(1.0, 1.0 / l1) * lr_;
    } else {
      t_ = lr_;
    }
    const double gtd = dot(g, d_);
    if (gtd > -o_.tolerance_change) break;
    int ls_evals = 0;
    if (o_.strong_wolfe) {
      const Vec x = flat_params();
      SearchResult r = strong_wolfe(x, t_, d_, loss, g, gtd);
      loss = r.loss, g = std::move(r.grad), t_ = r.t, ls_evals = r.evals;
      add_to_params(t_, d_);
    } else {
      add_to_params(t_, d_);
      if (it != o_.max_iter) {
        loss = closure_();
        g = flat_grad();
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    func_evals_ += ls_evals;
    if (it == o_.max_iter || current_evals >= o_.max_eval) break;
    if (max_abs(g) <= o_.tolerance_grad) break;
    if (max_abs(d_) * std::abs(t_) <= o_.tolerance_change) break;
    if (std::abs(loss - prev_loss_) < o_.tolerance_change) break;
  }
  ++steps_;
}

}  // namespace braid::optim
