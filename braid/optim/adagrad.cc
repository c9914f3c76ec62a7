#include "braid/optim/adagrad.h"

#include <cmath>

#include "braid/base/thread_pool.h"

namespace braid::optim {

AdaGrad::AdaGrad(std::vector<Tensor> params, AdaGradOptions options)
    : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.lr_decay < 0 || o_.weight_decay < 0 || o_.eps < 0 || o_.initial_accumulator_value < 0) {
    fail<ValueError>("adagrad: lr_decay, weight_decay, eps and initial_accumulator_value must be >= 0");
  }
}

void AdaGrad::step() {
  const int64_t t = steps_ + 1;
  const float clr = static_cast<float>(lr_ / (1 + static_cast<double>(t - 1) * o_.lr_decay));
  const float eps = static_cast<float>(o_.eps);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    const float wd = static_cast<float>(decay_of(i, o_.weight_decay));
    HostStaging host;
    float* p = host.writable(params_[i]);
    const float* g = host.grad(params_[i]);
    bool created = false;
    Tensor& sum_t = buffer(i, "sum", &created);
    if (created && o_.initial_accumulator_value != 0) sum_t.fill(o_.initial_accumulator_value);
    float* s = host.writable(sum_t);
    parallel_for(0, params_[i].numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const float gk = g[k] + wd * p[k];
        const float sk = s[k] + gk * gk;
        s[k] = sk;
        p[k] -= clr * gk / (std::sqrt(sk) + eps);
      }
    });
    host.write_back();
  }
  ++steps_;
}

nlohmann::json AdaGrad::hyper_parameters() const {
  return {{"lr_decay", o_.lr_decay}, {"weight_decay", o_.weight_decay},
          {"initial_accumulator_value", o_.initial_accumulator_value}, {"eps", o_.eps}};
}

void AdaGrad::set_hyper_parameters(const nlohmann::json& j) {
  o_.lr_decay = j.value("lr_decay", o_.lr_decay);
  o_.weight_decay = j.value("weight_decay", o_.weight_decay);
  o_.initial_accumulator_value = j.value("initial_accumulator_value", o_.initial_accumulator_value);
  o_.eps = j.value("eps", o_.eps);
}

}  // namespace braid::optim
