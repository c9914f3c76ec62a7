#include "braid/linear/cocoa.h"

#include <numeric>

#include "braid/base/error.h"
#include "braid/base/rng.h"
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
  const double scale = 1 / (p.reg.l2 * static_cast<double>(n));

  // alpha starts where SDCA's does; w = (1/(l2 n)) sum alpha_i x_i over every rank's rows.
  std::vector<double> alpha(mine.size()), w(d, 0.0), dw(d, 0.0);
  for (int64_t r = 0; r < local.size(); ++r) {
    alpha[r] = norms[r] == 0 ? 0 : sdca_start(p.loss, local.y[r]);
    const auto row = local.x.row(r);
    for (size_t j = 0; j < row.index.size(); ++j) w[row.index[j]] += alpha[r] * scale * row.value[j];
  }
  sum_over(comm, w, "cocoa setup: the starting w");

  std::vector<int64_t> order(mine.size());
  std::iota(order.begin(), order.end(), 0);
  Generator g(o.seed, static_cast<uint64_t>(comm.rank()));
  std::vector<double> z(mine.size());
  for (int round = 1; round <= o.epochs; ++round) {
    std::fill(dw.begin(), dw.end(), 0.0);
    for (int pass = 0; pass < o.local_passes; ++pass) {
      for (auto i = static_cast<int64_t>(order.size()) - 1; i > 0; --i) std::swap(order[i], order[g.below(i + 1)]);
      sdca_pass(p, local, norms, order, n, static_cast<double>(k), w, alpha, dw);
    }
    sum_over(comm, dw, fmt::format("cocoa round {}: the sum of the ranks' w updates", round));
    for (size_t j = 0; j < d; ++j) w[j] += dw[j];

    // The primal and dual sums over every rank's rows (w is the same everywhere).
    clock.pause();
    margins(local.x, w, z);
    double sums[2] = {loss_sum(p.loss, local.y, z), 0};
    for (int64_t r = 0; r < local.size(); ++r) sums[1] += dual_term(p.loss, local.y[r], alpha[r]);
    sum_over(comm, sums, fmt::format("cocoa round {}: the objective sums", round));
    const double half_norm = p.reg.l2 / 2 * std::inner_product(w.begin(), w.end(), w.begin(), 0.0);
    const double primal = sums[0] / static_cast<double>(n) + half_norm;
    const double dual = sums[1] / static_cast<double>(n) - half_norm;
    if (!clock.end_epoch(round, w, primal, primal - dual)) break;
  }
  return {std::move(w), clock.take_history()};
}

}  // namespace braid::linear_model
