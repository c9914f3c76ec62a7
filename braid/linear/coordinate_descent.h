// Stochastic coordinate descent on the primal (Shalev-Shwartz & Tewari 2011,
// "SCD"): each step picks a coordinate j at random and minimises a quadratic
// upper bound of P along it, which with an l1 term is a soft-threshold:
//
//   g_j = (1/n) sum_i loss'(z_i) x_ij + l2 w_j,  H_j = (b/n) sum_i x_ij^2 + l2
//   w_j <- S(w_j - g_j / H_j, l1 / H_j)
//
// where b bounds the loss's curvature (exact minimisation for squared loss).
// Margins z = Xw are kept up to date through the column of j, so a step costs
// the column's nonzeros. Smooth losses only (hinge has no curvature bound).
#pragma once

#include "braid/linear/solver.h"

namespace braid::linear_model {

Result solve_coordinate_descent(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                                const Monitor& monitor = {});

// S(v, t) = sign(v) max(|v| - t, 0).
double soft_threshold(double v, double t);

}  // namespace braid::linear_model
