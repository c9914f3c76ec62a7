#include "braid/optim/sgd.h"

#include "braid/ops/update.h"

namespace braid::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params), options.lr), o_(options) {
  if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0)) {
    fail<ValueError>("sgd: Nesterov momentum needs momentum > 0 and dampening = 0");
  }
  if (o_.momentum < 0 || o_.weight_decay < 0) fail<ValueError>("sgd: momentum and weight_decay must be >= 0");
}

void SGD::step() {
  refresh_scalars();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    bool first = false;
    const Tensor momentum = o_.momentum == 0 ? Tensor() : buffer(i, "momentum_buffer", &first);
    sgd_update_(params_[i], g, momentum, scalars_on(params_[i].device()),
                {.weight_decay = decay_of(i, o_.weight_decay), .momentum = o_.momentum, .dampening = o_.dampening,
                 .nesterov = o_.nesterov, .first = first});
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
