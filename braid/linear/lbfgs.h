// L-BFGS (Nocedal 1980) with a backtracking Armijo line search, written once
// over a Space that says where the iterate's coordinates live:
//   - LocalSpace: every coordinate in this process (the baseline);
//   - feature partitioning (feature_partition.h): each rank owns a block of
//     coordinates and the matching feature columns;
//   - Sandblaster (sandblaster.h): parameter shards own blocks, workers
//     compute the gradient of a large batch, a coordinator forms the scalars.
// The algorithm touches vectors only through element-wise updates of the
// owned coordinates and through Space::sum of partial dot products, so every
// placement runs the same iterates (up to the order of reductions).
// Smooth losses with l1 = 0; an iteration counts as an epoch.
#pragma once

#include <deque>
#include <span>
#include <vector>

#include "braid/linear/solver.h"

namespace braid::linear_model {

class Space {
 public:
  virtual ~Space() = default;
  // Coordinates owned here.
  virtual size_t size() const = 0;
  // The sum of `local` over every owner (the same value on every process).
  virtual double sum(double local) = 0;
  // P(w) and the owned part of its gradient, at the owned coordinates w.
  virtual double evaluate(std::span<const double> w, std::span<double> grad) = 0;
  // The whole weight vector from the owned parts (every process gets it).
  virtual std::vector<double> gather(std::span<const double> w) = 0;
};

// A curvature pair of the history: s = w' - w, y = g' - g, rho = 1 / (y . s).
struct CurvaturePair {
  std::vector<double> s, y;
  double rho = 0;
};
// d = -H g by the two-loop recursion with H0 = gamma I (dot products through
// `space`, so the owned parts of a partitioned vector combine).
void lbfgs_direction(Space& space, const std::deque<CurvaturePair>& pairs, std::span<const double> g,
                     std::vector<double>& d, double gamma);
// The sum over owners of a . b.
double space_dot(Space& space, std::span<const double> a, std::span<const double> b);

// Runs L-BFGS from w = 0; returns the owned coordinates in `w` and the
// progress history. `clock` reports after each iteration with the gathered w.
std::vector<Progress> run_lbfgs(Space& space, std::vector<double>& w, const SolverOptions& o, EpochClock& clock);

// run_lbfgs in `space` from w = 0, with the gathered w (every process has it).
Result solve_in_space(Space& space, EpochClock& clock, const SolverOptions& o);

// Every coordinate here: P(w) and its gradient over `train`.
class LocalSpace final : public Space {
 public:
  LocalSpace(const Problem& p, const Examples& train) : p_(p), train_(train) {}
  size_t size() const override { return static_cast<size_t>(train_.x.cols); }
  double sum(double local) override { return local; }
  double evaluate(std::span<const double> w, std::span<double> grad) override;
  std::vector<double> gather(std::span<const double> w) override { return {w.begin(), w.end()}; }

 private:
  Problem p_;
  const Examples& train_;
};

Result solve_lbfgs(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                   const Monitor& monitor = {});

// Checks that `p` suits the L-BFGS family (smooth loss, l1 = 0).
void check_lbfgs_problem(const Problem& p, const char* solver);

}  // namespace braid::linear_model
