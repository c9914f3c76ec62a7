// Per-rank memory of a config's plan for `braid sim` (docs/memory.md): the
// whole model built as `braid train` builds it, recompute applied, cut into
// the simulator's pipeline stages, each planned by train/memory_plan.h.
// Tensor-parallel shards are not built here (that takes the tensor group):
// a stage's figures are its whole layers', which `braid train --dry-run`
// under `braid launch` gives per shard.
#pragma once

#include <vector>

#include "braid/sim/plan_spec.h"
#include "braid/train/memory_plan.h"

namespace braid::sim {

// One plan per pipeline stage; `stage_of_layer`: the simulator's cut (empty
// without a pipeline).
std::vector<train::MemoryPlan> plan_memory_per_stage(const train::Config& config, const PlanSpec& plan,
                                                     const std::vector<int>& stage_of_layer);

}  // namespace braid::sim
