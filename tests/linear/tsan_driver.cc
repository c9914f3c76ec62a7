// Hogwild! and Cyclades under ThreadSanitizer (tests/linear/tsan.sh builds
// this with -fsanitize=thread): Hogwild!'s shared weights are relaxed atomics
// and Cyclades' threads touch disjoint coordinates between barriers, so a
// clean run means no access the algorithms do not intend is racy.
#include <cstdio>

#include "braid/linear/sgd.h"
#include "tests/linear/problems.h"

int main() {
  using namespace braid::linear_model;
  const Examples data = braid::linear_model::testing::random_problem(4000, 300, 12, false, 5);  // dense conflicts: races would show
  const Problem p{.loss = Loss::logistic, .reg = {1e-3, 1e-5}};
  SolverOptions o;
  o.epochs = 2;
  o.threads = 4;
  o.batch = 200;
  const double hog = solve_hogwild(p, data, nullptr, o).history.back().primal;
  const double cyc = solve_cyclades(p, data, nullptr, o).history.back().primal;
  std::printf("hogwild %.6f cyclades %.6f\n", hog, cyc);
  return 0;
}
