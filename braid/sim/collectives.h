// Collectives as tasks: each function appends to a Simulator the messages
// (and reductions, on the communication stream) of one collective over the
// ranks `group`, as braid's own algorithm (comm/algorithms) moves them.
// ready[i] is when group[i]'s input is ready; the result's [i] is when
// group[i] holds its output. Every function keeps its algorithm's closed form
// on idealised inputs (gamma 0, no contention): tests/sim/collectives_test.cc.
#pragma once

#include <string>
#include <vector>

#include "braid/comm/algorithms/algorithms.h"
#include "braid/sim/engine.h"

namespace braid::sim {

struct CollectiveArgs {
  std::vector<int> group;        // world ranks, in the group's rank order
  double bytes = 0;              // the whole vector, per rank
  std::vector<TaskId> ready;     // per group member; empty = ready at 0
  std::string name = "allreduce";  // prefix of the task names
  int stream = 1;                // where reductions run
  bool reduce = true;            // false: sizes only (no gamma)
};

// The algorithm braid's communicator would pick for `bytes` over `group` on
// this cluster: shared memory for a group inside one host when the cluster
// says so, else comm::choose_allreduce with the group's host count.
comm::Algorithm choose_allreduce(const Cluster& cluster, const std::vector<int>& group, double bytes);

std::vector<TaskId> allreduce(Simulator& sim, const CollectiveArgs& args,
                              comm::Algorithm algorithm = comm::Algorithm::automatic);
// Ring reduce-scatter / all-gather: `bytes` is the whole vector.
std::vector<TaskId> reduce_scatter(Simulator& sim, const CollectiveArgs& args);
std::vector<TaskId> allgather(Simulator& sim, const CollectiveArgs& args);
// Binomial tree from/to group[root].
std::vector<TaskId> broadcast(Simulator& sim, const CollectiveArgs& args, int root = 0);
std::vector<TaskId> reduce(Simulator& sim, const CollectiveArgs& args, int root = 0);
// Pairwise exchange; `bytes` is what each rank sends in all.
std::vector<TaskId> alltoall(Simulator& sim, const CollectiveArgs& args);

}  // namespace braid::sim
