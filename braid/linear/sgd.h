// Stochastic gradient descent on sparse examples, serial and on threads.
//
// P(w) is split into per-example terms that touch only the example's
// features (the Hogwild! paper's form): the regulariser of feature j is
// spread over the d_j rows that have it,
//   f_i(w) = loss(y_i, x_i . w) + sum_{j in e_i} (n / d_j) (l2/2 w_j^2 + l1 |w_j|),
// so (1/n) sum_i f_i = P and an update writes only the example's coordinates
// (l1 by a proximal soft-threshold). Step size eta_0 decay^epoch.
//
//   sgd       serial, over a seeded permutation per epoch
//   hogwild   Hogwild! (Niu et al. 2011): threads take slices of the
//             permutation and update shared weights without locks (relaxed
//             atomic loads and stores: an update may overwrite another's, as
//             the algorithm allows, but no access is a data race)
//   cyclades  Cyclades (Pan et al. 2016): the permutation is cut into batches;
//             a batch's conflict graph (examples sharing a feature) is split
//             into connected components, which threads run lock-free and
//             concurrently. Components share no coordinate, so the result is
//             bit-identical to serial sgd over the same permutation.
#pragma once

#include "braid/linear/solver.h"

namespace braid::linear_model {

Result solve_sgd(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                 const Monitor& monitor = {});
Result solve_hogwild(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                     const Monitor& monitor = {});
Result solve_cyclades(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                      const Monitor& monitor = {});

}  // namespace braid::linear_model
