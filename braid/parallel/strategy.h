// Strategy: the one interface the trainer calls around a step (docs/design.md,
// "parallel").
//
// A local training step is forward, backward, optimizer step. A Strategy turns
// it into a distributed one by acting at these points:
//
//   setup(params)         once, before the first step (broadcast the initial
//                         model, check that ranks agree, build buffers)
//   on_grad_ready(i, g)   during backward, the moment parameter i's gradient
//                         is final (start communicating it while the rest of
//                         backward runs)
//   before_step()         after backward, before the optimizer updates
//                         (finish combining gradients)
//   after_step()          after the optimizer update (allreduce re-broadcasts
//                         rank 0's buffers here)
//   step(lr)              instead of the optimizer update, when the strategy
//                         owns the optimizer (parameter server: push, pull)
//
// plus state for checkpoints and the shard of the data this rank reads.
// Today's strategies (none, allreduce, ps; factory.h) each implement this
// interface, so the trainer and the CLI swap them by name.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::parallel {

struct NamedParameter {
  std::string name;
  Tensor tensor;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;

  // `params` in the model's registration order, identical on every rank.
  // `description` is what ranks must agree on (the effective configuration).
  virtual void setup(const std::vector<NamedParameter>& params, const nlohmann::json& description) = 0;
  // The model's buffers (BatchNorm running statistics), given before setup().
  // Data-parallel strategies keep them equal to rank 0's, as DDP does.
  virtual void set_buffers(const std::vector<NamedParameter>& /*buffers*/) {}
  virtual void on_grad_ready(size_t /*index*/, Tensor& /*grad*/) {}
  virtual void before_step() {}
  virtual void after_step() {}

  // Strategies whose servers own the optimizer (parameter server): the
  // trainer then skips its local optimizer step and calls step(lr) with the
  // step's scheduled learning rate instead.
  virtual bool owns_optimizer() const { return false; }
  virtual void step(double /*lr*/) {}
  // After the last step, before the final evaluation: bring the local model
  // up to date and leave the job.
  virtual void finish() {}

  // When false, the next backward accumulates gradients locally without
  // communicating (gradient accumulation, like DDP's no_sync).
  virtual void set_sync(bool /*sync*/) {}

  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}

  // The shard of the data this process reads.
  virtual int data_rank() const { return 0; }
  virtual int data_world() const { return 1; }
  // Whether this process writes checkpoints and the final report.
  virtual bool is_leader() const { return data_rank() == 0; }
};

// The single-process strategy: every hook does nothing.
class LocalStrategy final : public Strategy {
 public:
  std::string name() const override { return "none"; }
  void setup(const std::vector<NamedParameter>&, const nlohmann::json&) override {}
};

}  // namespace braid::parallel
