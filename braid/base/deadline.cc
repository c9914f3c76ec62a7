#include "braid/base/deadline.h"

#include <fmt/format.h>

namespace braid {

Duration Deadline::remaining() const {
  if (is_never()) return Duration::max();
  auto left = at_ - Clock::now();
  return left > Duration::zero() ? std::chrono::duration_cast<Duration>(left) : Duration::zero();
}

std::string format_duration(Duration d) {
  if (d == Duration::max()) return "forever";
  double ns = static_cast<double>(d.count());
  if (ns >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3g} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.3g} us", ns / 1e3);
  return fmt::format("{} ns", d.count());
}

}  // namespace braid
