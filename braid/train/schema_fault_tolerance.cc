// parallel.fault_tolerance: what a data-parallel job does when a replica is
// lost (docs/fault_tolerance.md).
#include "braid/train/schema.h"

namespace braid::train {

void add_fault_tolerance_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "parallel.fault_tolerance", .type = T::String, .default_value = std::string("none"),
         .help = "none = a lost rank fails the job (braid launch --max-restarts restarts it from a checkpoint); "
                 "replica = the surviving data replicas agree on who is left, redo the step's gradient average "
                 "among themselves and go on, and a replacement (braid launch --replace N, or a process started with "
                 "BRAID_REPLICA_JOIN=1) joins at a step boundary with a live member's state (allreduce only)",
         .choices = {"none", "replica"}});
}

}  // namespace braid::train
