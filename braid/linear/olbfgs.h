// Online L-BFGS (Schraudolph, Yu & Guenter 2007), the stochastic
// quasi-Newton baseline on one process: L-BFGS directions from minibatch
// gradients, where each curvature pair takes both gradients on the same
// minibatch (y = g(w', b) - g(w, b)) so the pair measures curvature rather
// than sampling noise, and H0 is scaled by the average s.y / y.y of the
// pairs kept. Step eta_0 decay^epoch; minibatch `batch`; smooth losses, l2.
#pragma once

#include "braid/linear/solver.h"

namespace braid::linear_model {

Result solve_olbfgs(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                    const Monitor& monitor = {});

}  // namespace braid::linear_model
