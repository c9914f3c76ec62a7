#include "braid/linear/cocoa.h"

#include <numeric>

#include "braid/base/error.h"
#include "braid/linear/ranks.h"
#include "braid/linear/sdca.h"

namespace braid::linear_model {

Result solve_cocoa(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                   comm::Communicator& comm, const Monitor& monitor) {
  if (p.reg.l2 <= 0 || p.reg.l1 != 0) fail<ConfigError>("cocoa needs l2 > 0 and l1 = 0 (its local solver is SDCA)");
  if (o.local_passes < 1) fail<ConfigError>("cocoa local_passes must be >= 1, got {}", o.local_passes);
  EpochClock clock(o, p, test, monitor);
  const int k = comm.size();
  const int64_t n = train.size();
  const auto [lo, hi] = part_range(n, k, comm.rank());
  std::vector<int64_t> mine(static_cast<size_t>(hi - lo));
  std::iota(mine.begin(), mine.end(), lo);
  const Examples local = train.select(mine);
  const auto d = static_cast<size_t>(train.x.cols);
  const std::vector<double> norms = local.x.row_norms_squared();

  // alpha starts where SDCA's does; w = (1/(l2 n)) sum alpha_i x_i over every rank's rows.
  std::vector<double> w(d, 0.0), dw(d, 0.0);
  std::vector<double> alpha = sdca_start(p, local, norms, n, w);
  sum_over(comm, w, "cocoa setup: the starting w");

  std::vector<double> z(mine.size());
  for (int round = 1; round <= o.epochs; ++round) {
    std::fill(dw.begin(), dw.end(), 0.0);
    for (int pass = 0; pass < o.local_passes; ++pass) {
      // With one rank and one pass the orders are SDCA's, epoch for round.
      const int64_t visit = static_cast<int64_t>(round - 1) * o.local_passes + pass + 1;
      const std::vector<int64_t> order = data::permutation(local.size(), o.seed, epoch_stream(visit, comm.rank()));
      sdca_pass(p, local, norms, order, n, static_cast<double>(k), w, alpha, dw);
    }
    sum_over(comm, dw, fmt::format("cocoa round {}: the sum of the ranks' w updates", round));
    for (size_t j = 0; j < d; ++j) w[j] += dw[j];

    // The primal and dual sums over every rank's rows (w is the same everywhere).
    clock.pause();
    margins(local.x, w, z);
    double sums[2] = {loss_sum(p.loss, local.y, z), dual_sum(p.loss, local, alpha)};
    sum_over(comm, sums, fmt::format("cocoa round {}: the objective sums", round));
    const double half_norm = p.reg.l2 / 2 * std::inner_product(w.begin(), w.end(), w.begin(), 0.0);
    const double primal = sums[0] / static_cast<double>(n) + half_norm;
    const double dual = sums[1] / static_cast<double>(n) - half_norm;
    if (!clock.end_epoch(round, w, primal, primal - dual)) break;
  }
  return {std::move(w), clock.take_history()};
}

}  // namespace braid::linear_model
