// parallel.fault_tolerance = replica for `braid train` (docs/fault_tolerance.md):
// which plans it serves, and joining the replica group instead of a fixed
// process group.
#pragma once

#include <memory>

#include "braid/parallel/fault_tolerance/replica_group.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/config.h"

namespace braid::train {

struct ReplicaJoin {
  std::shared_ptr<parallel::fault_tolerance::ReplicaGroup> group;  // null: fault tolerance off
  int slot = 0, slots = 1;  // this replica's data shard, of how many
};

// ConfigError naming the key when the plan `po` (as parallel.* describe it)
// is one replica recovery cannot serve: anything but whole-model replicas
// averaging gradients by all-reduce.
void check_replica_plan(const Config& c, const parallel::PlanOptions& po);

// Joins the job's replica group from the launcher's environment (slot =
// RANK, slots = WORLD_SIZE; BRAID_REPLICA_JOIN=1: a replacement, which
// waits to be admitted). ConfigError outside a launcher.
ReplicaJoin join_replica_group(const Config& c, Duration timeout);

}  // namespace braid::train
