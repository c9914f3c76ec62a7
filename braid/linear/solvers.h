// Every linear solver by name, for the CLI and for code that takes the
// solver from configuration.
//   one process:  sdca, cd, lbfgs, olbfgs, sgd, hogwild, cyclades
//   across ranks: cocoa, features (feature-partitioned l-bfgs), sandblaster
#pragma once

#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/linear/solver.h"

namespace braid::linear_model {

const std::vector<std::string>& solver_names();
// Whether the solver runs across the ranks of a communicator.
bool is_distributed(const std::string& solver);
// Whether the solver reports a duality gap.
bool has_dual(const std::string& solver);

// Runs `solver`; `comm` is used by the distributed ones (a one-rank
// communicator runs them on one process) and ignored by the others.
Result solve(const std::string& solver, const Problem& p, const Examples& train, const Examples* test,
             const SolverOptions& o, comm::Communicator* comm, const Monitor& monitor = {});

}  // namespace braid::linear_model
