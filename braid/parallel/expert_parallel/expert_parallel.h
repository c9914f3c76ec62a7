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
//
// With ZeRO (stages 1-2) each parameter group has its own layout: the
// non-expert parameters are split over the whole data axis (the inner
// ZeroSync), the expert parameters over their replicas only (a second
// ZeroSync over that group, its reduce-scatter scaled to the same 1 / data
// degree); the optimizer updates both groups' slices, dense ones first.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/parallel/grad_sync.h"
#include "braid/parallel/zero/zero.h"

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
  // inner: the data axis's sync (bucketed all-reduce, or ZeRO built over the
  // non-expert parameters), given the non-expert parameters only; model: the
  // rank's model after shard_experts (its parameter order numbers the
  // optimizer's buffers); expert_zero: with a ZeRO inner, ZeRO over
  // groups.replicas built over the expert parameters.
  ExpertDataSync(std::unique_ptr<GradSync> inner, ExpertGroups groups, std::set<std::string> expert_names,
                 const nn::Module& model, std::unique_ptr<zero::ZeroSync> expert_zero = nullptr);
  std::string name() const override { return inner_->name() + " + experts over " + std::to_string(groups_.replicas.size()) + " replicas"; }
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void on_grad_ready(size_t index, Tensor& grad) override;
  void set_sync(bool sync) override;
  void finish() override;
  void after_step() override;
  std::vector<NamedParameter> optimizer_parameters() const override;
  std::vector<std::pair<int64_t, int64_t>> optimizer_parameter_runs() const override;
  bool splits_optimizer() const override { return inner_->splits_optimizer(); }
  void attach(optim::Optimizer& optimizer) override;
  // Without ZeRO each rank of an expert group holds its experts' whole
  // gradients: a norm sums them over the group. ZeRO's slices already split
  // the experts over the whole data axis (replicas x expert group).
  bool holds_split(const std::string& name) const override { return !expert_zero_ && names_.count(name) > 0; }
  void sum_split(std::vector<double>& values) const override;
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
  optim::OptimizerState zero_optimizer_state(const optim::Optimizer& optimizer);
  void load_zero_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state);
  Tensor my_experts(const Tensor& all) const;

  std::unique_ptr<GradSync> inner_;
  std::unique_ptr<zero::ZeroSync> expert_zero_;
  zero::ZeroSync* dense_zero_ = nullptr;  // inner_ when it is ZeRO
  ExpertGroups groups_;
  std::set<std::string> names_;
  std::vector<NamedParameter> experts_;
  std::set<size_t> expert_index_;      // in the model's parameter order (the optimizer's)
  std::vector<int64_t> dense_index_;   // plan index -> inner index (-1: an expert)
  std::vector<int64_t> expert_of_;     // plan index -> index among the experts (-1: not one)
  std::vector<std::string> model_names_;  // the model's parameter order
  bool sync_ = true;
};

}  // namespace braid::parallel::expert_parallel
