#include "braid/optim/adam.h"

#include <algorithm>
#include <vector>

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
  // On a GPU the parameters of one device and weight decay update in one op:
  // the multi-tensor kernel takes a few launches where a call per parameter
  // took two each, with the same arithmetic (bit-equal). The CPU keeps a call
  // per parameter.
  struct Group {
    Device device;
    double decay;
    std::vector<Tensor> p, g, m, v;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    const double decay = decay_of(i, o_.weight_decay);
    const Device device = params_[i].device();
    if (!device.is_cuda()) {
      update.weight_decay = decay;
      adam_update_(params_[i], g, buffer(i, "exp_avg"), buffer(i, "exp_avg_sq"), scalars_on(device), update);
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const Group& x) { return x.device == device && x.decay == decay; });
    if (group == groups.end()) group = groups.insert(groups.end(), Group{device, decay, {}, {}, {}, {}});
    group->p.push_back(params_[i]);
    group->g.push_back(g);
    group->m.push_back(buffer(i, "exp_avg"));
    group->v.push_back(buffer(i, "exp_avg_sq"));
  }
  for (const Group& group : groups) {
    update.weight_decay = group.decay;
    adam_update_multi_(group.p, group.g, group.m, group.v, scalars_on(group.device), update);
  }
  ++steps_;
}

nlohmann::json Adam::hyper_parameters() const { return moment_hyper_parameters(o_); }

void Adam::set_hyper_parameters(const nlohmann::json& j) { set_moment_hyper_parameters(o_, j); }

}  // namespace braid::optim
