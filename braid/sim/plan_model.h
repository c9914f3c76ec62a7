// A plan's training steps as simulator tasks (docs/sim.md, "How a plan
// becomes tasks"): the schedule of each pipeline stage (GPipe or 1F1B over
// micro-batches), each layer's forward and backward on every rank that holds
// it (a tensor-parallel layer's share of the work, and its all-reduces as
// parallel/tensor_parallel/rewrite.h places them), activations and their
// gradients sent between stages, the data axis's bucketed all-reduce (started
// as buckets fill when overlapped, optionally through a codec), the optimizer
// update, the parameter servers' push, update and pull, and local SGD's
// periodic averaging.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/sim/codec_cost.h"
#include "braid/sim/engine.h"
#include "braid/sim/plan_spec.h"
#include "braid/sim/step_profile.h"

namespace braid::sim {

struct StepModelInputs {
  // The step of one replica at the plan's micro-batch size (batch /
  // microbatches), per layer; tensor-parallel shares are taken from it.
  StepProfile profile{};
  // Which layers the tensor-parallel rewrite splits (empty when tensor = 1).
  std::vector<int> tensor_roles{};  // parallel::tensor_parallel::LayerRole per layer
  CodecCost codec{};              // per bucket (plan.codec != none)
  // Seconds the data loader's thread spends on a batch, beside each step of
  // every worker (0: left out).
  double load = 0;
  // Per rank and step, compute takes this much longer (1: as measured);
  // empty: none. Drawn by the caller (stragglers).
  std::vector<std::vector<double>> jitter{};
  // The stage of each layer (pipeline > 1), as the pipeline plan cuts the model.
  std::vector<int> stage_of_layer{};
};

struct StepMarks {
  // steps[s][w]: the task that ends step s on worker w (world rank servers + w).
  std::vector<std::vector<TaskId>> steps;
  // offsets[w]: how late worker w started (asynchronous parameter servers'
  // workers run out of step with each other), seconds.
  std::vector<double> offsets;
};

// Appends `steps` steps of `plan` to `sim` (whose cluster has plan.world ranks).
StepMarks add_steps(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in, int steps);

}  // namespace braid::sim
