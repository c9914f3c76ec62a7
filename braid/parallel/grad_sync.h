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
#include <vector>

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
};

// Calls sync.on_grad_ready(i, grad) whenever params[i]'s gradient is final.
// `sync` must outlive the parameters' hooks (a Plan owns both).
void connect_grad_hooks(GradSync& sync, const std::vector<NamedParameter>& params);

}  // namespace braid::parallel
