// Optimizer: updates a fixed list of parameters from their accumulated .grad.
//
// Every optimizer keeps its per-parameter buffers (momentum, second moments,
// ...) as float32 tensors of the parameter's shape, created on first use, and
// its scalar state (learning rate, hyper-parameters, step count) in a JSON
// object, so a checkpoint stores both losslessly (braid/train/checkpoint.h).
// Updates are fused: one parallel pass over each parameter reads the param,
// its grad and its buffers once and writes them once.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::optim {

// What a checkpoint needs to restore an optimizer exactly.
struct OptimizerState {
  // "<param index>.<buffer name>", e.g. "3.momentum_buffer" (float32).
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json scalars;  // {"name":..., "lr":..., "steps":..., hyper-parameters}
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the parameters' current gradients; parameters whose
  // gradient is undefined (unused this step) are left as they are.
  virtual void step() = 0;
  // A short lower-case name: "sgd", "adam", ...
  virtual std::string name() const = 0;

  // Clears the gradients. set_to_none drops them (the next backward writes a
  // fresh buffer; no memset); otherwise each keeps its buffer, marked as zero
  // without being touched (Tensor::zero_grad).
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& params() const { return params_; }
  // step() calls so far.
  int64_t steps() const { return steps_; }
  // The values the update ops read that change between steps, [lr, t] in f64
  // with t = the step being taken (braid/ops/update.h); step() refreshes them.
  // A captured training step binds this tensor as an input.
  const Tensor& scalars() const { return scalars_; }
  // Writes [lr, steps + 1] into scalars(); step() starts with it.
  const Tensor& refresh_scalars();
  // scalars() as refreshed last, on `device` (the update ops take it beside
  // the parameter, and ops refuse inputs on two devices): scalars() itself on
  // the host and meta, else a copy made at most once per refresh.
  const Tensor& scalars_on(Device device);
  // Counts a step whose update ops ran outside step() (a captured graph's).
  void count_step() { ++steps_; }

  // Which parameters the weight decay applies to: decays[i] false exempts
  // parameter i from it (the rest of its update is unchanged), one flag per
  // parameter. AdamW as nanoGPT and Megatron-LM run it decays the matrices of
  // linear layers and embeddings and leaves norm gains and biases alone
  // (matrix_decay_mask). Empty, the default: every parameter decays.
  void set_decay_mask(std::vector<bool> decays);
  const std::vector<bool>& decay_mask() const { return decays_; }

  // ZeRO gives each rank a slice of every parameter (parallel/zero/): a
  // whole-tensor figure (the norms LARS and LAMB scale by) is then the sum of
  // the ranks' partial figures. `sums` holds `figures` values per parameter,
  // parameter-major; the function replaces each by its total over the ranks
  // that share the parameter. Unset: every parameter is whole here.
  using PartialSums = std::function<void(std::vector<double>& sums, size_t figures)>;
  void set_partial_sums(PartialSums totals) { partial_sums_ = std::move(totals); }
  // True when step() changes parameters only through registry ops (SGD,
  // Adam, AdamW), so a captured training step sees the update
  // (braid/graph/step.h); the others update with their own loops.
  virtual bool updates_through_ops() const { return false; }
  // False for methods that cannot run on slices of parameters (L-BFGS's
  // full-batch closure evaluates the whole model).
  virtual bool works_on_shards() const { return true; }

  // Hyper-parameters beyond lr and steps ({"momentum": 0.9, ...}), saved in
  // checkpoints; set_hyper_parameters changes those it names (population-
  // based training perturbs them between steps).
  virtual nlohmann::json hyper_parameters() const { return nlohmann::json::object(); }
  virtual void set_hyper_parameters(const nlohmann::json&) {}

  OptimizerState state_dict() const;
  // Restores state from state_dict() of an optimizer of the same kind over
  // parameters of the same shapes; throws ValueError naming what differs.
  void load_state_dict(const OptimizerState& state);

 protected:
  // Buffer `name` of parameter i (float32, parameter's shape), zero-filled
  // when first asked for. `created` tells the caller it is new.
  Tensor& buffer(size_t i, const std::string& name, bool* created = nullptr);
  bool has_buffer(size_t i, const std::string& name) const;
  // Host float32 pointers for the optimizers that update with their own
  // loops (AdaGrad, RMSProp, LARS, LAMB, L-BFGS); checks dtype and contiguity.
  // A host tensor is used in place. A tensor on another device is copied to
  // the host once per staging and, when asked for writable, copied back by
  // write_back(): those optimizers then work on any device (one round trip a
  // step) while their state stays on the parameter's device. SGD and Adam
  // update through ops and run on the device itself.
  class HostStaging {
   public:
    float* writable(const Tensor& t);
    const float* readable(const Tensor& t);
    // The parameter's gradient (defined: callers skip parameters without one).
    const float* grad(const Tensor& param);
    // Copies every writable staged tensor back to its device.
    void write_back();

   private:
    struct Staged {
      Tensor source, host;
      bool dirty = false;
    };
    float* stage(const Tensor& t, bool write);
    std::vector<Staged> staged_;
  };
  // `weight_decay` for parameter i, or 0 where the decay mask exempts it.
  double decay_of(size_t i, double weight_decay) const {
    return decays_.empty() || decays_[i] ? weight_decay : 0.0;
  }
  // set_partial_sums's totals, in place (nothing when unset).
  void total_partial_sums(std::vector<double>& sums, size_t figures) const {
    if (partial_sums_) partial_sums_(sums, figures);
  }

  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;

 private:
  std::vector<std::map<std::string, Tensor>> buffers_;
  std::vector<bool> decays_;  // set_decay_mask's; empty: all
  PartialSums partial_sums_;
  Tensor scalars_ = Tensor::zeros({2}, DType::f64);
  int64_t scalars_version_ = 0;  // refresh_scalars() calls
  struct ScalarsCopy {
    Device device;
    Tensor values;
    int64_t version = -1;
  };
  std::vector<ScalarsCopy> scalars_copies_;  // scalars_on()'s, one per device
};

// One flag per parameter: true for those of two or more dimensions (weights
// of linear, convolution and embedding layers), false for vectors and
// scalars (biases, norm gains): the parameters decoupled weight decay is
// meant for (Loshchilov & Hutter; nanoGPT's and Megatron-LM's groups).
// `ndims[i]`: parameter i's number of dimensions (a flat ZeRO slice's is its
// whole parameter's, not 1).
std::vector<bool> matrix_decay_mask(const std::vector<int64_t>& ndims);
std::vector<bool> matrix_decay_mask(const std::vector<Tensor>& params);

// Elements per parallel_for chunk in the fused update loops.
inline constexpr int64_t kUpdateGrain = 16384;

// The hyper-parameters the Adam family's options share (beta1, beta2, eps,
// weight_decay), for Optimizer::hyper_parameters and its inverse.
template <class Options>
nlohmann::json moment_hyper_parameters(const Options& o) {
  return {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay}};
}

template <class Options>
void set_moment_hyper_parameters(Options& o, const nlohmann::json& j) {
  o.beta1 = j.value("beta1", o.beta1);
  o.beta2 = j.value("beta2", o.beta2);
  o.eps = j.value("eps", o.eps);
  o.weight_decay = j.value("weight_decay", o.weight_decay);
}

}  // namespace braid::optim
