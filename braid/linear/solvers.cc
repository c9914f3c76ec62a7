#include "braid/linear/solvers.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/linear/cocoa.h"
#include "braid/linear/coordinate_descent.h"
#include "braid/linear/feature_partition.h"
#include "braid/linear/lbfgs.h"
#include "braid/linear/olbfgs.h"
#include "braid/linear/sandblaster.h"
#include "braid/linear/sdca.h"
#include "braid/linear/sgd.h"

namespace braid::linear_model {

const std::vector<std::string>& solver_names() {
  static const std::vector<std::string> names{"sdca",     "cd",    "lbfgs",    "olbfgs",     "sgd",
                                              "hogwild",  "cyclades", "cocoa", "features", "sandblaster"};
  return names;
}

bool is_distributed(const std::string& solver) {
  return solver == "cocoa" || solver == "features" || solver == "sandblaster";
}

bool has_dual(const std::string& solver) { return solver == "sdca" || solver == "cocoa"; }

Result solve(const std::string& solver, const Problem& p, const Examples& train, const Examples* test,
             const SolverOptions& o, comm::Communicator* comm, const Monitor& monitor) {
  if (o.epochs < 0) fail<ConfigError>("epochs must be >= 0, got {}", o.epochs);
  if (solver == "sdca") return solve_sdca(p, train, test, o, monitor);
  if (solver == "cd") return solve_coordinate_descent(p, train, test, o, monitor);
  if (solver == "lbfgs") return solve_lbfgs(p, train, test, o, monitor);
  if (solver == "olbfgs") return solve_olbfgs(p, train, test, o, monitor);
  if (solver == "sgd") return solve_sgd(p, train, test, o, monitor);
  if (solver == "hogwild") return solve_hogwild(p, train, test, o, monitor);
  if (solver == "cyclades") return solve_cyclades(p, train, test, o, monitor);
  if (is_distributed(solver)) {
    BRAID_CHECK(comm != nullptr && comm->valid(), "{} needs a communicator", solver);
    if (solver == "cocoa") return solve_cocoa(p, train, test, o, *comm, monitor);
    if (solver == "features") return solve_feature_partition(p, train, test, o, *comm, monitor);
    return solve_sandblaster(p, train, test, o, *comm, monitor);
  }
  std::string known;
  for (const auto& n : solver_names()) known += (known.empty() ? "" : ", ") + n;
  fail<ConfigError>("unknown linear solver '{}' ({})", solver, known);
}

}  // namespace braid::linear_model
