// braid's two kinds of errors (docs/design.md, "Two kinds of errors").
//
// Recoverable conditions are typed subclasses of braid::Error that callers can
// catch and act on. Broken invariants and bad arguments go through the
// BRAID_CHECK* macros, which throw (never abort) and print the values involved.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace braid {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed something the operation cannot accept (shape, dtype, value).
class ValueError : public Error { using Error::Error; };
// An index outside the valid range.
class IndexError : public Error { using Error::Error; };
// A file is missing, truncated or corrupt.
class IoError : public Error { using Error::Error; };
// A configuration key or value is wrong.
class ConfigError : public Error { using Error::Error; };
// A wait ran past its deadline.
class TimeoutError : public Error { using Error::Error; };
// A peer process disconnected, died or sent something malformed.
class PeerError : public Error { using Error::Error; };
// Training diverged (NaN/Inf).
class NumericError : public Error { using Error::Error; };
// A device has no memory left for an allocation, even after its allocator's
// cache was given back. Callers may retry with a smaller batch.
class OutOfMemoryError : public Error { using Error::Error; };

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);
}  // namespace detail

template <class E = Error, class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace braid

// BRAID_CHECK(cond, "format", args...): throws braid::Error naming the condition.
#define BRAID_CHECK(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond)) [[unlikely]]                                                          \
      ::braid::detail::check_failed(__FILE__, __LINE__,                                \
                                    "check failed: " #cond __VA_OPT__(": " +) \
                                        __VA_OPT__(::fmt::format(__VA_ARGS__)));       \
  } while (0)

#define BRAID_CHECK_OP_(a, b, op)                                                       \
  do {                                                                                  \
    const auto& braid_a_ = (a);                                                         \
    const auto& braid_b_ = (b);                                                         \
    if (!(braid_a_ op braid_b_)) [[unlikely]]                                           \
      ::braid::detail::check_failed(                                                    \
          __FILE__, __LINE__,                                                           \
          ::fmt::format("check failed: {} " #op " {} ({} vs {})", #a, #b, braid_a_, braid_b_)); \
  } while (0)

#define BRAID_CHECK_EQ(a, b) BRAID_CHECK_OP_(a, b, ==)
#define BRAID_CHECK_NE(a, b) BRAID_CHECK_OP_(a, b, !=)
#define BRAID_CHECK_LT(a, b) BRAID_CHECK_OP_(a, b, <)
#define BRAID_CHECK_LE(a, b) BRAID_CHECK_OP_(a, b, <=)
#define BRAID_CHECK_GT(a, b) BRAID_CHECK_OP_(a, b, >)
#define BRAID_CHECK_GE(a, b) BRAID_CHECK_OP_(a, b, >=)
