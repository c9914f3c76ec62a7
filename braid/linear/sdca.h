// Stochastic dual coordinate ascent (Shalev-Shwartz & Zhang 2013) for the
// L2-regularised problems of objective.h (l1 must be 0, l2 > 0).
//
// The dual variables alpha_i give w = (1/(l2 n)) sum_i alpha_i x_i; each step
// maximises the dual in one coordinate exactly (closed form for hinge,
// squared hinge and squared loss, a safeguarded Newton solve for logistic).
// The duality gap P(w) - D(alpha) bounds the distance to the optimum and is
// reported every epoch.
#pragma once

#include <span>
#include <vector>

#include "braid/linear/solver.h"

namespace braid::linear_model {

// The change of alpha_i that maximises the dual along coordinate i, given
// the label y, the current margin z = x_i . w and q = sigma |x_i|^2 / (l2 n)
// (sigma = 1 for SDCA; CoCoA+ passes its sigma' = K).
double sdca_delta(Loss loss, double y, double alpha, double z, double q);
// The starting dual variables of `data`'s rows (0, or an interior point
// where the conjugate needs one; 0 for empty rows, whose first pass moves them
// to their best), and w += (1/(l2 n)) sum_i alpha_i x_i. `n` is the global
// number of examples.
std::vector<double> sdca_start(const Problem& p, const Examples& data, std::span<const double> norms, int64_t n,
                               std::span<double> w);
// sum_i -loss*(-alpha_i) over `data`'s rows: n times the dual's loss part.
double dual_sum(Loss loss, const Examples& data, std::span<const double> alpha);

// One SDCA pass over `rows` in order: updates alpha (indexed like rows'
// positions in data) and dw += (scale / (l2 n)) sum delta_i x_i, reading
// margins from w + sigma * dw (w empty: from sigma * dw). `n` is the global
// number of examples.
void sdca_pass(const Problem& p, const Examples& data, std::span<const double> norms, std::span<const int64_t> rows,
               int64_t n, double sigma, std::span<const double> w, std::span<double> alpha, std::span<double> dw);

Result solve_sdca(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                  const Monitor& monitor = {});

}  // namespace braid::linear_model
