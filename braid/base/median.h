// Medians of timings and other samples: what braid keeps of repeated
// measurements, since one slow run on a busy machine moves a mean but not a
// median.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "braid/base/error.h"

namespace braid {

// The element at index n/2 once sorted (for an even count the upper of the
// two middle ones): always one of the sample's own values. O(n).
inline double upper_median(std::vector<double> v) {
  BRAID_CHECK(!v.empty(), "upper_median of no values");
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The median proper: for an even count, the mean of the two middle values.
inline double median(std::vector<double> v) {
  BRAID_CHECK(!v.empty(), "median of no values");
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

}  // namespace braid
