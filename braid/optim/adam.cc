#include "braid/optim/adam.h"

#include <cmath>

#include "braid/base/thread_pool.h"

namespace braid::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params), options.lr), o_(options), decoupled_(decoupled_weight_decay) {
  if (o_.beta1 < 0 || o_.beta1 >= 1 || o_.beta2 < 0 || o_.beta2 >= 1) {
    fail<ValueError>("{}: betas must lie in [0, 1), got ({}, {})", name(), o_.beta1, o_.beta2);
  }
  if (o_.eps < 0 || o_.weight_decay < 0) fail<ValueError>("{}: eps and weight_decay must be >= 0", name());
}

void Adam::step() {
  const int64_t t = steps_ + 1;
  // Scalars in double as PyTorch computes them (Python floats), used in float.
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(t));
  const double bc2_sqrt = std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(t)));
  const float step_size = static_cast<float>(lr_ / bc1);
  const float inv_bc2_sqrt = static_cast<float>(1 / bc2_sqrt);
  const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
  const float eps = static_cast<float>(o_.eps), wd = static_cast<float>(o_.weight_decay);
  const float decay = decoupled_ ? static_cast<float>(1 - lr_ * o_.weight_decay) : 1.0f;
  const float l2 = decoupled_ ? 0.0f : wd;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    float* p = param_data(params_[i]);
    const float* g = grad_data(params_[i]);
    float* m = buffer(i, "exp_avg").data<float>();
    float* v = buffer(i, "exp_avg_sq").data<float>();
    parallel_for(0, params_[i].numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const float pk = p[k] * decay;
        const float gk = g[k] + l2 * pk;
        const float mk = b1 * m[k] + (1 - b1) * gk;
        const float vk = b2 * v[k] + (1 - b2) * gk * gk;
        m[k] = mk;
        v[k] = vk;
        p[k] = pk - step_size * mk / (std::sqrt(vk) * inv_bc2_sqrt + eps);
      }
    });
  }
  ++steps_;
}

nlohmann::json Adam::hyper_parameters() const { return moment_hyper_parameters(o_); }

void Adam::set_hyper_parameters(const nlohmann::json& j) { set_moment_hyper_parameters(o_, j); }

}  // namespace braid::optim
