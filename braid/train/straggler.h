// Naming the slow rank (docs/reliability.md, "Stragglers").
//
// In a synchronous step every rank takes as long as the slowest, so wall time
// cannot tell who is slow. What differs is each rank's own work: its step time
// minus the time it waited for its peers (the gradient combination). Every
// `every` steps the ranks share their mean of it over the window; a rank whose
// figure exceeds `ratio` times the median of the others' for `windows` checks
// in a row is a straggler, reported once per streak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::train {

struct StragglerOptions {
  int64_t every = 50;  // steps between exchanges; 0: off
  double ratio = 1.5;  // own work / median of the others' that counts as slow
  int windows = 2;     // consecutive slow windows before a rank is named
};

struct StragglerReport {
  int64_t step = 0;            // the step that closed the window
  int64_t window_steps = 0;    // steps in the window
  int rank = -1;               // world rank
  double own_ms = 0;           // its mean own work per step
  double others_median_ms = 0; // median of the other ranks' figure
  double ratio = 0;
  int windows = 0;             // consecutive slow windows so far
  std::vector<double> all_ms;  // every rank's figure, by rank

  // "straggler: rank 1 works 52.3 ms per step, 3.9x the median of the others (13.4 ms), 2 windows of 50 steps in a row (to step 100)"
  std::string message() const;
  nlohmann::json to_json() const;
};

class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerOptions options) : o_(options) {}

  // One step's own work, milliseconds.
  void add(double own_ms) {
    sum_ms_ += own_ms;
    ++steps_;
  }
  // Whether the window closes at `step` (then the caller gathers mean_ms()
  // from every rank and calls judge).
  bool due(int64_t step) const { return o_.every > 0 && steps_ > 0 && step % o_.every == 0; }
  double mean_ms() const { return steps_ ? sum_ms_ / static_cast<double>(steps_) : 0; }
  // Every rank's mean_ms() by rank; returns the ranks named now, and starts a
  // new window.
  std::vector<StragglerReport> judge(int64_t step, const std::vector<double>& all_ms);

 private:
  StragglerOptions o_;
  double sum_ms_ = 0;
  int64_t steps_ = 0;
  std::vector<int> streak_;  // per rank: consecutive slow windows
};

}  // namespace braid::train
