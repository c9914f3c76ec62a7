#include "braid/optim/lars.h"

#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/optim/reduce.h"

namespace braid::optim {

LARS::LARS(std::vector<Tensor> params, LARSOptions options) : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.momentum < 0 || o_.weight_decay < 0 || o_.eta <= 0 || o_.eps < 0) {
    fail<ValueError>("lars: momentum, weight_decay, eps must be >= 0 and eta > 0");
  }
}

void LARS::step() {
  const float mom = static_cast<float>(o_.momentum);
  // ||w||^2 and ||g||^2 of every parameter first, totalled across shards in one go.
  // One staging for both passes: a device parameter crosses to the host once.
  HostStaging host;
  std::vector<double> sq(2 * params_.size(), 0.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    sq[2 * i] = sum_squares(host.readable(params_[i]), params_[i].numel());
    sq[2 * i + 1] = sum_squares(host.grad(params_[i]), params_[i].numel());
  }
  total_partial_sums(sq, 2);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    float* p = host.writable(params_[i]);
    const float* g = host.grad(params_[i]);
    const int64_t n = params_[i].numel();
    const double w_norm = std::sqrt(sq[2 * i]), g_norm = std::sqrt(sq[2 * i + 1]);
    const double decay = decay_of(i, o_.weight_decay);
    const float wd = static_cast<float>(decay);
    const double trust = w_norm > 0 && g_norm > 0 ? o_.eta * w_norm / (g_norm + decay * w_norm + o_.eps) : 1.0;
    const float scale = static_cast<float>(lr_ * trust);
    float* b = host.writable(buffer(i, "momentum_buffer"));
    parallel_for(0, n, kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const float bk = mom * b[k] + scale * (g[k] + wd * p[k]);
        b[k] = bk;
        p[k] -= bk;
      }
    });
  }
  host.write_back();
  ++steps_;
}

nlohmann::json LARS::hyper_parameters() const {
  return {{"momentum", o_.momentum}, {"weight_decay", o_.weight_decay}, {"eta", o_.eta}, {"eps", o_.eps}};
}

void LARS::set_hyper_parameters(const nlohmann::json& j) {
  o_.momentum = j.value("momentum", o_.momentum);
  o_.weight_decay = j.value("weight_decay", o_.weight_decay);
  o_.eta = j.value("eta", o_.eta);
  o_.eps = j.value("eps", o_.eps);
}

}  // namespace braid::optim
