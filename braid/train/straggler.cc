#include "braid/train/straggler.h"

#include <algorithm>

#include <fmt/format.h>

#include "braid/base/median.h"

namespace braid::train {

std::string StragglerReport::message() const {
  return fmt::format("straggler: rank {} works {:.1f} ms per step, {:.1f}x the median of the others ({:.1f} ms), "
                     "{} windows of {} steps in a row (to step {})",
                     rank, own_ms, ratio, others_median_ms, windows, window_steps, step);
}

nlohmann::json StragglerReport::to_json() const {
  return {{"step", step},       {"rank", rank},     {"own_ms", own_ms},   {"others_median_ms", others_median_ms},
          {"ratio", ratio},     {"windows", windows}, {"window_steps", window_steps}, {"all_ms", all_ms}};
}

std::vector<StragglerReport> StragglerWatch::judge(int64_t step, const std::vector<double>& all_ms) {
  std::vector<StragglerReport> named;
  const int64_t window = steps_;
  sum_ms_ = 0, steps_ = 0;
  const int p = static_cast<int>(all_ms.size());
  streak_.resize(static_cast<size_t>(p), 0);
  if (p < 2) return named;
  for (int r = 0; r < p; ++r) {
    std::vector<double> others;
    for (int q = 0; q < p; ++q)
      if (q != r) others.push_back(all_ms[q]);
    const double median = braid::median(std::move(others));
    const double ratio = median > 0 ? all_ms[r] / median : 0;
    if (median > 0 && ratio >= o_.ratio) {
      // Named once, when the streak reaches `windows`; a longer streak stays quiet.
      if (++streak_[r] == o_.windows) {
        named.push_back({.step = step, .window_steps = window, .rank = r, .own_ms = all_ms[r],
                         .others_median_ms = median, .ratio = ratio, .windows = streak_[r], .all_ms = all_ms});
      }
    } else {
      streak_[r] = 0;
    }
  }
  return named;
}

}  // namespace braid::train
