#include "braid/linear/feature_partition.h"

#include "braid/linear/ranks.h"

namespace braid::linear_model {

FeatureSpace::FeatureSpace(const Problem& p, const Examples& train, comm::Communicator comm)
    : p_(p), train_(train), comm_(std::move(comm)) {
  std::tie(begin_, end_) = part_range(train.x.cols, comm_.size(), comm_.rank());
  block_ = train.x.column_block(begin_, end_);
  block_cols_ = block_.transpose();
}

double FeatureSpace::sum(double local) { return sum_over(comm_, local, "feature-partitioned l-bfgs: a dot product"); }

double FeatureSpace::evaluate(std::span<const double> w, std::span<double> grad) {
  const auto n = static_cast<size_t>(train_.size());
  ++evaluations_;
  // [z (n values), |w_J|^2]: one all-reduce carries the shared term and the norm.
  std::vector<double> shared(n + 1);
  margins(block_, w, std::span(shared).first(n));
  for (double v : w) shared[n] += v * v;
  sum_over(comm_, shared, fmt::format("feature-partitioned l-bfgs evaluation {}: the margins", evaluations_));
  const std::span<const double> z = std::span(shared).first(n);
  std::vector<double> deriv(n);
  double loss = 0;
  for (size_t i = 0; i < n; ++i) {
    loss += loss_value(p_.loss, train_.y[i], z[i]);
    deriv[i] = loss_derivative(p_.loss, train_.y[i], z[i]) / static_cast<double>(n);
  }
  for (size_t j = 0; j < grad.size(); ++j) {
    double g = p_.reg.l2 * w[j];
    for (int64_t k = block_cols_.start[j]; k < block_cols_.start[j + 1]; ++k)
      g += deriv[block_cols_.index[k]] * block_cols_.value[k];
    grad[j] = g;
  }
  return loss / static_cast<double>(n) + p_.reg.l2 / 2 * shared[n];
}

std::vector<double> FeatureSpace::gather(std::span<const double> w) {
  std::vector<double> full(static_cast<size_t>(train_.x.cols), 0.0);
  std::copy(w.begin(), w.end(), full.begin() + begin_);
  sum_over(comm_, full, "feature-partitioned l-bfgs: gathering w");
  return full;
}

Result solve_feature_partition(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                               comm::Communicator& comm, const Monitor& monitor) {
  check_lbfgs_problem(p, "feature-partitioned l-bfgs");
  EpochClock clock(o, p, test, monitor);
  FeatureSpace space(p, train, comm);
  return solve_in_space(space, clock, o);
}

}  // namespace braid::linear_model
