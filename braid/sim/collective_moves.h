// How the collectives of collectives.h lay out their tasks. Each algorithm is
// written against Moves, in group ranks, step by step as braid's own code
// (comm/algorithms) runs on each rank: a rank's thread posts sends (which run
// on their own), waits for messages and reduces what arrived.
//
// Per rank the algorithm keeps an After: what that rank's thread has waited
// for so far. An algorithm takes one per rank (its input is ready) and
// returns one per rank (its call has returned: output in place, sends done).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "braid/sim/collectives.h"

namespace braid::sim {

using After = std::vector<TaskId>;

class Moves {
 public:
  // `group`: world ranks of this (sub-)collective; `name` prefixes its task names.
  Moves(Simulator& sim, std::vector<int> group, const CollectiveArgs& args, std::string name);

  int size() const { return static_cast<int>(group_.size()); }
  double bytes() const { return args_.bytes; }
  Simulator& sim() const { return sim_; }
  const CollectiveArgs& args() const { return args_; }
  const std::vector<int>& group() const { return group_; }
  // "allreduce ring " + what: computed once per step, shared by its tasks.
  std::string name(const std::string& what) const { return name_ + " " + what; }

  // Group rank i sends `bytes` to j once `after` is done and its previous
  // message to j has gone: a channel delivers in order, as braid's
  // transports do (one sender thread per peer).
  TaskId send(int i, int j, double bytes, const After& after, const std::string& name);
  // Group rank i combines `bytes` it received: n gamma seconds (intra.gamma,
  // the host's reduction speed) on the communication stream, after `at`.
  // Returns what follows the reduction; `at` itself when reductions are
  // free (args.reduce false or gamma 0).
  After reduce(int i, double bytes, After at, const std::string& name);
  // `at` also waits for `t`. Lists past a few entries become one join, so a
  // rank that waits on p messages costs O(p), not O(p^2), dependencies.
  void wait(After& at, TaskId t) const;
  // One task standing for `at` (itself when it is one task, else a join).
  TaskId done(const After& at) const;

 private:
  Simulator& sim_;
  std::vector<int> group_;
  const CollectiveArgs& args_;
  std::string name_;
  double gamma_;
  std::unordered_map<int64_t, TaskId> channel_;  // i * size + j -> the last message from i to j
};

// The algorithms, over m's group; `in` and the result as above.
std::vector<After> ring_reduce_scatter(Moves& m, std::vector<After> in);
std::vector<After> ring_allgather(Moves& m, std::vector<After> in);
std::vector<After> ring_allreduce(Moves& m, std::vector<After> in);
std::vector<After> recursive_doubling_allreduce(Moves& m, std::vector<After> in);
std::vector<After> halving_doubling_allreduce(Moves& m, std::vector<After> in);
std::vector<After> binary_blocks_allreduce(Moves& m, std::vector<After> in);
std::vector<After> binary_tree_allreduce(Moves& m, std::vector<After> in);
std::vector<After> double_binary_tree_allreduce(Moves& m, std::vector<After> in);
std::vector<After> direct_allreduce(Moves& m, std::vector<After> in);
std::vector<After> binomial_broadcast(Moves& m, std::vector<After> in, int root);
std::vector<After> binomial_reduce(Moves& m, std::vector<After> in, int root);
std::vector<After> pairwise_alltoall(Moves& m, std::vector<After> in);

}  // namespace braid::sim
