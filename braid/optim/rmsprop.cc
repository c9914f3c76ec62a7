#include "braid/optim/rmsprop.h"

#include <cmath>

#include "braid/base/thread_pool.h"

namespace braid::optim {

RMSProp::RMSProp(std::vector<Tensor> params, RMSPropOptions options)
    : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.alpha < 0 || o_.alpha >= 1) fail<ValueError>("rmsprop: alpha must lie in [0, 1), got {}", o_.alpha);
  if (o_.eps < 0 || o_.weight_decay < 0 || o_.momentum < 0) {
    fail<ValueError>("rmsprop: eps, weight_decay and momentum must be >= 0");
  }
}

void RMSProp::step() {
  const float lr = static_cast<float>(lr_), alpha = static_cast<float>(o_.alpha);
  const float eps = static_cast<float>(o_.eps);
  const float mom = static_cast<float>(o_.momentum);
  const bool centered = o_.centered, use_mom = o_.momentum > 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    const float wd = static_cast<float>(decay_of(i, o_.weight_decay));
    HostStaging host;
    float* p = host.writable(params_[i]);
    const float* g = host.grad(params_[i]);
    float* s = host.writable(buffer(i, "square_avg"));
    float* a = centered ? host.writable(buffer(i, "grad_avg")) : nullptr;
    float* b = use_mom ? host.writable(buffer(i, "momentum_buffer")) : nullptr;
    parallel_for(0, params_[i].numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const float gk = g[k] + wd * p[k];
        const float sk = alpha * s[k] + (1 - alpha) * gk * gk;
        s[k] = sk;
        float var = sk;
        if (centered) {
          const float ak = alpha * a[k] + (1 - alpha) * gk;
          a[k] = ak;
          var = sk - ak * ak;
        }
        const float denom = std::sqrt(var) + eps;
        if (use_mom) {
          const float bk = mom * b[k] + gk / denom;
          b[k] = bk;
          p[k] -= lr * bk;
        } else {
          p[k] -= lr * gk / denom;
        }
      }
    });
    host.write_back();
  }
  ++steps_;
}

nlohmann::json RMSProp::hyper_parameters() const {
  return {{"alpha", o_.alpha}, {"eps", o_.eps}, {"weight_decay", o_.weight_decay},
          {"momentum", o_.momentum}, {"centered", o_.centered}};
}

void RMSProp::set_hyper_parameters(const nlohmann::json& j) {
  o_.alpha = j.value("alpha", o_.alpha);
  o_.eps = j.value("eps", o_.eps);
  o_.weight_decay = j.value("weight_decay", o_.weight_decay);
  o_.momentum = j.value("momentum", o_.momentum);
  o_.centered = j.value("centered", o_.centered);
}

}  // namespace braid::optim
