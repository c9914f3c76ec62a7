#include "braid/optim/sgd.h"

#include "braid/base/thread_pool.h"

namespace braid::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0)) {
    fail<ValueError>("sgd: Nesterov momentum needs momentum > 0 and dampening = 0");
  }
  if (o_.momentum < 0 || o_.weight_decay < 0) fail<ValueError>("sgd: momentum and weight_decay must be >= 0");
}

void SGD::step() {
  const float lr = static_cast<float>(lr_), wd = static_cast<float>(o_.weight_decay);
  const float mom = static_cast<float>(o_.momentum), damp = 1.0f - static_cast<float>(o_.dampening);
  const bool nesterov = o_.nesterov;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    float* p = param_data(params_[i]);
    const float* g = grad_data(params_[i]);
    const int64_t n = params_[i].numel();
    if (mom == 0) {
      parallel_for(0, n, kUpdateGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) p[k] -= lr * (g[k] + wd * p[k]);
      });
      continue;
    }
    bool first = false;
    float* b = buffer(i, "momentum_buffer", &first).data<float>();
    parallel_for(0, n, kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const float d = g[k] + wd * p[k];
        const float bk = first ? d : mom * b[k] + damp * d;
        b[k] = bk;
        p[k] -= lr * (nesterov ? d + mom * bk : bk);
      }
    });
  }
  ++steps_;
}

nlohmann::json SGD::hyper_parameters() const {
  return {{"momentum", o_.momentum}, {"dampening", o_.dampening}, {"weight_decay", o_.weight_decay},
          {"nesterov", o_.nesterov}};
}

void SGD::set_hyper_parameters(const nlohmann::json& j) {
  o_.momentum = j.value("momentum", o_.momentum);
  o_.dampening = j.value("dampening", o_.dampening);
  o_.weight_decay = j.value("weight_decay", o_.weight_decay);
  o_.nesterov = j.value("nesterov", o_.nesterov);
}

}  // namespace braid::optim
