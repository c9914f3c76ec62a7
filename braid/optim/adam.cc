#include "braid/optim/adam.h"

#include "braid/ops/update.h"

namespace braid::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params), options.lr), o_(options), decoupled_(decoupled_weight_decay) {
  if (o_.beta1 < 0 || o_.beta1 >= 1 || o_.beta2 < 0 || o_.beta2 >= 1) {
    fail<ValueError>("{}: betas must lie in [0, 1), got ({}, {})", name(), o_.beta1, o_.beta2);
  }
  if (o_.eps < 0 || o_.weight_decay < 0) fail<ValueError>("{}: eps and weight_decay must be >= 0", name());
}

void Adam::step() {
  refresh_scalars();
  AdamUpdate update{.beta1 = o_.beta1, .beta2 = o_.beta2, .eps = o_.eps, .decoupled = decoupled_};
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    update.weight_decay = decay_of(i, o_.weight_decay);
    adam_update_(params_[i], g, buffer(i, "exp_avg"), buffer(i, "exp_avg_sq"), scalars_on(params_[i].device()),
                 update);
  }
  ++steps_;
}

nlohmann::json Adam::hyper_parameters() const { return moment_hyper_parameters(o_); }

void Adam::set_hyper_parameters(const nlohmann::json& j) { set_moment_hyper_parameters(o_, j); }

}  // namespace braid::optim
