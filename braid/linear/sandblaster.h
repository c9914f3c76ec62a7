// Sandblaster L-BFGS (Dean et al. 2012, DistBelief): batch L-BFGS with the
// parameters and the L-BFGS history sharded over parameter servers, the
// gradient of each large batch computed by workers, and a coordinator that
// forms every scalar the line search and the two-loop recursion decide on.
//
// Roles over one communicator of P ranks: rank 0 is the coordinator, ranks
// 1..S the shards (S = SolverOptions::shards; shard s owns a contiguous block
// of coordinates, its slice of w, of the gradient and of every (s, y) pair),
// ranks S+1..P-1 the workers. Per evaluation the shards publish w, the
// coordinator hands out work portions of `portion` rows to whichever worker
// asks next (Sandblaster's load balancing: a slow worker simply takes fewer
// portions), the workers' gradient and loss sums are added into the shards'
// blocks, and each dot product is a sum of the shards' partial dots reduced
// to the coordinator and broadcast from it. The iterates are those of
// single-process L-BFGS (lbfgs.h) up to the order of the sums.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/linear/lbfgs.h"

namespace braid::linear_model {

class SandblasterSpace final : public Space {
 public:
  enum class Role { coordinator, shard, worker };
  SandblasterSpace(const Problem& p, const Examples& train, const SolverOptions& o, comm::Communicator comm);
  Role role() const { return role_; }
  size_t size() const override { return static_cast<size_t>(end_ - begin_); }
  double sum(double local) override;
  double evaluate(std::span<const double> w, std::span<double> grad) override;
  std::vector<double> gather(std::span<const double> w) override;
  // Portions each worker ran in the evaluations so far (coordinator only).
  const std::vector<int64_t>& portions_done() const { return portions_done_; }

 private:
  void hand_out_portions();                             // coordinator
  void run_portions(std::span<const double> w, std::span<double> sums);  // worker

  Problem p_;
  const Examples& train_;
  comm::Communicator comm_;
  Role role_;
  int shards_ = 1, workers_ = 1;
  int64_t begin_ = 0, end_ = 0;  // owned coordinates (shards only)
  int64_t portion_ = 1, portions_ = 1;
  int64_t evaluations_ = 0;
  std::vector<int64_t> portions_done_;
};

Result solve_sandblaster(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                         comm::Communicator& comm, const Monitor& monitor = {});

}  // namespace braid::linear_model
