#include "braid/optim/lamb.h"

#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/optim/reduce.h"

namespace braid::optim {

LAMB::LAMB(std::vector<Tensor> params, LAMBOptions options) : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.beta1 < 0 || o_.beta1 >= 1 || o_.beta2 < 0 || o_.beta2 >= 1) {
    fail<ValueError>("lamb: betas must lie in [0, 1), got ({}, {})", o_.beta1, o_.beta2);
  }
  if (o_.eps < 0 || o_.weight_decay < 0) fail<ValueError>("lamb: eps and weight_decay must be >= 0");
}

void LAMB::step() {
  const double t = static_cast<double>(steps_ + 1);
  const float inv_bc1 = static_cast<float>(1 / (1 - std::pow(o_.beta1, t)));
  const float inv_bc2 = static_cast<float>(1 / (1 - std::pow(o_.beta2, t)));
  const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
  const float eps = static_cast<float>(o_.eps);
  float wd = 0;  // parameter i's (the decay mask may exempt it), set before each use of ratio
  auto ratio = [&](const float* m, const float* v, const float* p, int64_t k) {
    return (m[k] * inv_bc1) / (std::sqrt(v[k] * inv_bc2) + eps) + wd * p[k];
  };
  // Pass 1 over every parameter: moments, ||w||^2 and ||r||^2, totalled across
  // shards in one go; pass 2 recomputes r (cheaper than storing it).
  // One staging for both passes: a device parameter crosses to the host once.
  HostStaging host;
  std::vector<double> sq(2 * params_.size(), 0.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    wd = static_cast<float>(decay_of(i, o_.weight_decay));
    const float* p = host.readable(params_[i]);
    const float* g = host.grad(params_[i]);
    float* m = host.writable(buffer(i, "exp_avg"));
    float* v = host.writable(buffer(i, "exp_avg_sq"));
    const int64_t n = params_[i].numel();
    sq[2 * i + 1] = parallel_sum(n, [&](int64_t lo, int64_t hi) {
      double s = 0;
      for (int64_t k = lo; k < hi; ++k) {
        m[k] = b1 * m[k] + (1 - b1) * g[k];
        v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k];
        const float r = ratio(m, v, p, k);
        s += static_cast<double>(r) * r;
      }
      return s;
    });
    sq[2 * i] = sum_squares(p, n);
  }
  total_partial_sums(sq, 2);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    wd = static_cast<float>(decay_of(i, o_.weight_decay));
    float* p = host.writable(params_[i]);
    const float* m = host.readable(buffer(i, "exp_avg"));
    const float* v = host.readable(buffer(i, "exp_avg_sq"));
    const double w_norm = std::sqrt(sq[2 * i]), r_norm = std::sqrt(sq[2 * i + 1]);
    const double trust = w_norm > 0 && r_norm > 0 ? w_norm / r_norm : 1.0;
    const float scale = static_cast<float>(lr_ * trust);
    parallel_for(0, params_[i].numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) p[k] -= scale * ratio(m, v, p, k);
    });
  }
  host.write_back();
  ++steps_;
}

nlohmann::json LAMB::hyper_parameters() const { return moment_hyper_parameters(o_); }

void LAMB::set_hyper_parameters(const nlohmann::json& j) { set_moment_hyper_parameters(o_, j); }

}  // namespace braid::optim
