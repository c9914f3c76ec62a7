// What every linear solver takes and reports.
//
// Solvers run for `epochs` passes over the data (an L-BFGS iteration counts
// as one) and call the monitor after each. The monitor's figures are
// computed outside the solver's clock, so `seconds` is time spent solving:
// "time to a fixed objective" compares solvers, not their bookkeeping.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "braid/data/sampler.h"
#include "braid/linear/objective.h"

namespace braid::linear_model {

struct SolverOptions {
  int epochs = 50;
  int threads = 1;          // hogwild, cyclades
  uint64_t seed = 0;        // sample and coordinate orders
  double step = 0.1;        // sgd family: step size eta_0
  double step_decay = 0.9;  // sgd family: eta_e = eta_0 * decay^e
  int64_t batch = 1000;     // cyclades: samples per conflict-graph batch; olbfgs: minibatch
  int history = 10;         // l-bfgs family: (s, y) pairs kept
  int local_passes = 1;     // cocoa: local SDCA passes over a rank's rows per round
  int shards = 1;           // sandblaster: parameter shards (ranks 1..shards)
  int64_t portion = 0;      // sandblaster: rows per work portion; 0 = n / (4 workers)
  // Stop once the primal objective reaches `target` (time-to-objective runs),
  // or the duality gap falls to `gap_tolerance` (relative to |P|).
  double target = -std::numeric_limits<double>::infinity();
  double gap_tolerance = 0;
};

// The stream of data::permutation for visit `epoch` (1-based) of rank `rank`'s
// rows: one fresh permutation per visit, and ranks never share one.
inline uint64_t epoch_stream(int64_t epoch, int rank) {
  return (static_cast<uint64_t>(epoch) << 24) | static_cast<uint64_t>(rank);
}

struct Progress {
  int epoch = 0;           // 1-based; 0 is the starting point
  double seconds = 0;      // solver time so far, without the monitor's
  double primal = 0;       // P(w) on the training rows
  double gap = std::numeric_limits<double>::quiet_NaN();  // P - D, for dual solvers
  double test_score = std::numeric_limits<double>::quiet_NaN();
};

// Called after each epoch (on every rank for distributed solvers, each with
// the same figures); returning false stops the solver.
using Monitor = std::function<bool(const Progress&)>;

struct Result {
  std::vector<double> w;  // the full weight vector (every rank has it at the end)
  std::vector<Progress> history;
};

// Tracks time, evaluates the test score and applies the stopping rules; the
// solvers share it so each reports the same way.
class EpochClock {
 public:
  EpochClock(const SolverOptions& options, const Problem& problem, const Examples* test, Monitor monitor);
  // Ends epoch `epoch` with the given objective (and gap); returns whether to
  // go on. Pauses the solver clock while it evaluates.
  bool end_epoch(int epoch, std::span<const double> w, double primal,
                 double gap = std::numeric_limits<double>::quiet_NaN());
  // Stops the solver clock before the caller computes what it reports (the
  // objective, the gap, a gathered w); end_epoch restarts it.
  void pause();
  std::vector<Progress> take_history() { return std::move(history_); }

 private:
  const SolverOptions& o_;
  Problem problem_;
  const Examples* test_;
  Monitor monitor_;
  double seconds_ = 0;
  int64_t started_ns_ = 0;
  bool paused_ = false;
  std::vector<Progress> history_;
};

}  // namespace braid::linear_model
