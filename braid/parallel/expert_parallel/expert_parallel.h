// Expert parallelism (parallel.expert = X; docs/moe.md): a split of the data
// axis. Neighbouring groups of X data ranks form expert groups; within one,
// each rank holds E / X of every MoE layer's experts (the router, attention
// and every other weight stay whole) and the layers exchange rows through
// exchange.h. The data / X ranks at the same place in their groups hold the
// same experts: expert replicas.
//
// Expert-data parallelism: the plan's data-axis gradient sync combines every
// non-expert gradient over the whole data axis, as without experts;
// ExpertDataSync wraps it and combines each expert gradient over its
// replicas only, scaled 1 / data degree (an expert's local gradient already
// sums its group's X ranks' losses, which the data axis averages).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/parallel/grad_sync.h"

namespace braid::parallel::expert_parallel {

struct ExpertGroups {
  comm::Communicator experts;   // the X ranks sharing one copy of every expert
  comm::Communicator replicas;  // the ranks holding the same experts as this one
  int data_degree = 1;
};

// Collective over `data`: splits it into groups of `degree` neighbouring
// ranks (degree divides data.size(); ConfigError naming parallel.expert otherwise).
ExpertGroups split_expert_groups(const comm::Communicator& data, int degree);

// Keeps this rank's experts in every MoE layer of `model` and routes those
// layers through the expert group. Returns the expert parameters' names. A
// model without MoE layers, or whose expert count the group does not divide,
// is refused (ConfigError naming the keys).
std::set<std::string> shard_experts(nn::Module& model, const ExpertGroups& groups);

class ExpertDataSync final : public GradSync {
 public:
  // inner: the data axis's sync (bucketed all-reduce), given the non-expert parameters only;
  // model: the rank's model after shard_experts (its parameter order numbers the optimizer's buffers).
  ExpertDataSync(std::unique_ptr<GradSync> inner, ExpertGroups groups, std::set<std::string> expert_names,
                 const nn::Module& model);
  std::string name() const override { return inner_->name() + " + experts over " + std::to_string(groups_.replicas.size()) + " replicas"; }
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void on_grad_ready(size_t index, Tensor& grad) override;
  void set_sync(bool sync) override;
  void finish() override;
  void after_step() override { inner_->after_step(); }
  // An MoE layer's forward exchanges rows with the expert group: every data
  // rank runs the same batches, evaluation included.
  bool collective_forward() const override { return true; }
  nlohmann::json take_stats() override { return inner_->take_stats(); }
  // Checkpoints hold every expert: gathered over the expert group, sliced back on load.
  nn::NamedTensors model_state(const nn::Module& model) override;
  void load_model_state(nn::Module& model, const nn::NamedTensors& state) override;
  optim::OptimizerState optimizer_state(const optim::Optimizer& optimizer) override;
  void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) override;

 private:
  Tensor gather_experts(const Tensor& local) const;
  Tensor my_experts(const Tensor& all) const;

  std::unique_ptr<GradSync> inner_;
  ExpertGroups groups_;
  std::set<std::string> names_;
  std::vector<NamedParameter> experts_;
  std::set<size_t> expert_index_;      // in the model's parameter order (the optimizer's)
  std::vector<int64_t> dense_index_;   // plan index -> inner index (-1: an expert)
  bool sync_ = true;
};

}  // namespace braid::parallel::expert_parallel
