// Feature-partitioned L-BFGS: each of K ranks owns a contiguous block J of
// the coordinates and the matching columns X_J. The shared term is the
// margin vector z = sum_k X_Jk w_Jk, one all-reduce of n values per
// evaluation; then every rank has z, so the loss and the derivatives
// loss'(z_i) are known everywhere and each rank forms its own block of the
// gradient, X_J^T loss'(z) / n + l2 w_J, without further communication. Dot
// products of the L-BFGS recursion add the blocks' partial sums.
//
// This is the split the reference notes call model partitioning for linear
// models: it pays when d is large and n moderate (a rank never holds more than
// d/K weights or history entries). The iterates are L-BFGS's on one process
// (lbfgs.h), up to the order of the sums.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/linear/lbfgs.h"

namespace braid::linear_model {

class FeatureSpace final : public Space {
 public:
  // Every rank passes the whole training set and keeps its column block.
  FeatureSpace(const Problem& p, const Examples& train, comm::Communicator comm);
  size_t size() const override { return static_cast<size_t>(end_ - begin_); }
  double sum(double local) override;
  double evaluate(std::span<const double> w, std::span<double> grad) override;
  std::vector<double> gather(std::span<const double> w) override;

 private:
  Problem p_;
  const Examples& train_;
  comm::Communicator comm_;
  int64_t begin_ = 0, end_ = 0;
  SparseMatrix block_;       // rows x [begin, end), row-major: z_partial = X_J w_J
  SparseMatrix block_cols_;  // its transpose: grad_J = X_J^T loss'(z)
  int64_t evaluations_ = 0;
};

Result solve_feature_partition(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                               comm::Communicator& comm, const Monitor& monitor = {});

}  // namespace braid::linear_model
