// CoCoA+ (Ma et al. 2015): distributed dual coordinate ascent. Each of K
// ranks owns a contiguous block of the training rows and their dual
// variables; a round runs `local_passes` SDCA passes over the rank's rows on
// the local subproblem with sigma' = K (adding, gamma = 1), then the ranks
// add their changes of w in one all-reduce. With K = 1 it is SDCA. The
// duality gap, summed over ranks, is reported every round.
//
// Every rank passes the whole training set (it reads its own rows); every
// rank ends with the same w and reports the same figures.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/linear/solver.h"

namespace braid::linear_model {

Result solve_cocoa(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                   comm::Communicator& comm, const Monitor& monitor = {});

}  // namespace braid::linear_model
