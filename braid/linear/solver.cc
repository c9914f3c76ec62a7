#include "braid/linear/solver.h"

#include <chrono>
#include <cmath>

namespace braid::linear_model {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

EpochClock::EpochClock(const SolverOptions& options, const Problem& problem, const Examples* test, Monitor monitor)
    : o_(options), problem_(problem), test_(test), monitor_(std::move(monitor)), started_ns_(now_ns()) {}

void EpochClock::pause() {
  if (paused_) return;
  seconds_ += static_cast<double>(now_ns() - started_ns_) * 1e-9;
  paused_ = true;
}

bool EpochClock::end_epoch(int epoch, std::span<const double> w, double primal, double gap) {
  pause();
  Progress p{.epoch = epoch, .seconds = seconds_, .primal = primal, .gap = gap};
  if (test_ != nullptr && test_->size() > 0) p.test_score = score(problem_.loss, *test_, w);
  history_.push_back(p);
  bool go_on = !monitor_ || monitor_(p);
  if (primal <= o_.target) go_on = false;
  if (!std::isnan(gap) && gap <= o_.gap_tolerance * std::abs(primal)) go_on = false;
  if (!std::isfinite(primal)) go_on = false;
  paused_ = false;
  started_ns_ = now_ns();
  return go_on;
}

}  // namespace braid::linear_model
