// Deadlines for every blocking wait (docs/design.md, "Every wait has a
// deadline"). A Deadline is an absolute point on the steady clock, so it can be
// passed down through several nested waits without each one restarting the
// timer.
#pragma once

#include <chrono>
#include <string>

namespace braid {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

class Deadline {
 public:
  static Deadline after(Duration d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool is_never() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= at_; }
  // Time left, clamped at zero; Duration::max() for never.
  Duration remaining() const;
  // The earlier of the two.
  Deadline min(Deadline other) const { return at_ < other.at_ ? *this : other; }

 private:
  Clock::time_point at_;
};

// "1.5 s", "250 ms", "12 us": for error messages.
std::string format_duration(Duration d);

// Seconds as a double since `start`.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace braid
