// Gradient synchronisation: the plan part that combines gradients across the
// data axis while and after backward runs (docs/design.md, "parallel").
//
//   setup(params, buffers)   once, before the first step: agree on the model,
//                            make replicas start equal, build buffers
//   on_grad_ready(i, g)      during backward, when parameter i's gradient is
//                            final (start communicating while backward goes on)
//   set_sync(false)          the next backward only accumulates (micro-batches
//                            before the last one)
//   finish()                 after backward, before the optimizer: every
//                            gradient is the combined one
//   after_step()             after the optimizer update
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "braid/nn/module.h"
#include "braid/optim/optimizer.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel {

struct NamedParameter {
  std::string name;
  Tensor tensor;
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual std::string name() const = 0;
  // `params` in registration order, identical on every rank of the data axis;
  // `description` is what those ranks must agree on (the effective configuration).
  virtual void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                     const nlohmann::json& description) = 0;
  virtual void on_grad_ready(size_t /*index*/, Tensor& /*grad*/) {}
  virtual void set_sync(bool /*sync*/) {}
  virtual void finish() {}
  virtual void after_step() {}

  // What the optimizer updates, when not the model's parameters: ZeRO's
  // slices of them, each under its parameter's name. Empty: the parameters.
  virtual std::vector<NamedParameter> optimizer_parameters() const { return {}; }
  // Where each of optimizer_parameters() lies in its parameter: the run
  // [begin, end) of the parameter's elements in row-major order. Sharded
  // checkpoints write each rank's runs without gathering them. Empty when
  // the optimizer updates whole parameters.
  virtual std::vector<std::pair<int64_t, int64_t>> optimizer_parameter_runs() const { return {}; }
  // True when those slices split the data axis's work: a whole-model figure
  // (the gradient norm) is then summed over the data axis.
  virtual bool splits_optimizer() const { return false; }
  // Parameters held split over data ranks otherwise than by
  // optimizer_parameters()' slices (expert parallelism: each rank of an
  // expert group holds some of every MoE layer's experts): a whole-model
  // figure sums such a parameter's part over those ranks with sum_split
  // (in place, collective over the data axis), the others' once.
  virtual bool holds_split(const std::string& /*name*/) const { return false; }
  virtual void sum_split(std::vector<double>& /*values*/) const {}
  // The optimizer that will update optimizer_parameters(), after setup().
  virtual void attach(optim::Optimizer& /*optimizer*/) {}
  // True when forward itself is collective over the data axis (ZeRO-3
  // gathers each layer's parameters as it runs): every data rank must then
  // run the same batches, in evaluation too.
  virtual bool collective_forward() const { return false; }

  // Checkpoints hold the whole model and whole optimizer buffers (numbered by
  // the model's parameter order), so any later plan can load them. Collective
  // over the data axis where the state is split; the result is complete on
  // data rank 0.
  virtual nn::NamedTensors model_state(const nn::Module& model) { return model.state_dict(); }
  virtual void load_model_state(nn::Module& model, const nn::NamedTensors& state) { model.load_state_dict(state); }
  virtual optim::OptimizerState optimizer_state(const optim::Optimizer& optimizer) { return optimizer.state_dict(); }
  virtual void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
    optimizer.load_state_dict(state);
  }

  // Figures of the steps since the last call (a codec's bytes before and
  // after encoding, its seconds); empty when it keeps none.
  virtual nlohmann::json take_stats() { return nlohmann::json::object(); }
  // What each data rank remembers between steps besides the model and the
  // optimizer (a codec's error-feedback memory): collective over the data
  // axis, every rank's state on data rank 0 as "r<rank>.<name>"; and back,
  // each rank taking its own (before or after setup).
  virtual nn::NamedTensors rank_state() { return {}; }
  virtual void load_rank_state(const nn::NamedTensors& /*state*/) {}
};

// Calls sync.on_grad_ready(i, grad) whenever params[i]'s gradient is final.
// `sync` must outlive the parameters' hooks (a Plan owns both).
void connect_grad_hooks(GradSync& sync, const std::vector<NamedParameter>& params);

}  // namespace braid::parallel
