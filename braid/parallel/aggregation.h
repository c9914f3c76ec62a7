// Replica aggregation: the plan part that decides how the data axis's
// replicas of the model are combined around the optimizer step
// (docs/design.md, "parallel"). The parameter server is one (its servers own
// the optimizer); local SGD, EASGD and gossip are others.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "braid/parallel/grad_sync.h"

namespace braid::parallel {

class Aggregation {
 public:
  virtual ~Aggregation() = default;
  virtual std::string name() const = 0;
  virtual void setup(const std::vector<NamedParameter>& params, const nlohmann::json& description) = 0;
  // True: the trainer skips its local optimizer and calls step(lr) with the
  // step's scheduled learning rate instead.
  virtual bool owns_optimizer() const { return false; }
  virtual void step(double /*lr*/) {}
  // After the local optimizer's update (when it does not own the optimizer).
  virtual void after_step() {}
  // After the last step, before the final evaluation: bring the local model
  // up to date and leave the job.
  virtual void finish() {}
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}
  // The replica this process trains, among how many (the data it reads).
  virtual int replica() const = 0;
  virtual int replicas() const = 0;
};

}  // namespace braid::parallel
