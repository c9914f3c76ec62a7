// Replica aggregation: the plan part that decides how the data axis's
// replicas of the model are combined around the optimizer step
// (docs/design.md, "parallel"). The parameter server is one (its servers own
// the optimizer); the skeleton partition another (replicas step their local
// optimizers and combine afterwards); local SGD, EASGD and gossip would be more.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "braid/parallel/grad_sync.h"

namespace braid::parallel {

class Aggregation {
 public:
  virtual ~Aggregation() = default;
  virtual std::string name() const = 0;
  // `params` and `buffers` (BatchNorm running statistics) in registration
  // order; `description` is what the replicas must agree on.
  virtual void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                     const nlohmann::json& description) = 0;
  // True: the trainer skips its local optimizer and calls step(lr) with the
  // step's scheduled learning rate instead.
  virtual bool owns_optimizer() const { return false; }
  // At the start of a step, before forward: an exchange of the weights the
  // step starts from can begin here and overlap the step's compute.
  virtual void before_forward() {}
  // Asked before forward (the trainer, on plans without a grad sync or a
  // pipeline): true when this step's update is already decided without this
  // rank's gradient (a timeout-hybrid worker behind its coordinator); the
  // trainer then skips forward and backward, and combine_gradients() puts the
  // decided update in .grad.
  virtual bool step_decided() { return false; }
  // After backward (and the grad sync), before clipping and the optimizer:
  // the gradients in the parameters' .grad may be combined or adjusted here.
  virtual void combine_gradients() {}
  virtual void step(double /*lr*/) {}
  // After the local optimizer's update (when it does not own the optimizer);
  // the step's gradients are still in the parameters' .grad.
  virtual void after_step() {}
  // The steps every replica together has taken, as this replica last heard
  // from the others (counted where replicas report to parameter servers:
  // their pushes times the steps each stands for); nullopt where replicas do
  // not count them together. A job-wide budget (`train.budget = job`) stops
  // every replica once it reaches the budget, whoever took the steps.
  virtual std::optional<int64_t> job_steps() const { return std::nullopt; }
  // After the last step, before the final evaluation: bring the local model
  // up to date and leave the job.
  virtual void finish() {}
  // Around an evaluation during training (before finish()): put the model
  // the job produces in the parameters where this replica holds a copy of it
  // (EASGD's center, ADMM's z), and this replica's own values back after.
  // Local, no communication. Default: the replica is evaluated as it is.
  virtual void begin_evaluation() {}
  virtual void end_evaluation() {}
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}
  // The model a checkpoint holds when replicas differ between combinations:
  // collective over the data axis where the aggregation needs it.
  virtual nn::NamedTensors model_state(const nn::Module& model) { return model.state_dict(); }
  // The replica this process trains, among how many (the data it reads).
  virtual int replica() const = 0;
  virtual int replicas() const = 0;
  // Where replicas are separate models that are never merged (an ensemble's
  // members), this process's member index, else -1: every member then writes
  // its own checkpoints and member 0 reports for the job, whatever data each reads.
  virtual int member() const { return -1; }
  // Figures of the run so far for reports and benchmarks (bytes exchanged),
  // and the same as one line for the user; empty when it keeps none.
  // Figures of the steps since the last call (a codec's bytes and seconds);
  // empty when it keeps none.
  virtual nlohmann::json take_stats() { return nlohmann::json::object(); }
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
  virtual std::string report() const { return ""; }
};

}  // namespace braid::parallel
