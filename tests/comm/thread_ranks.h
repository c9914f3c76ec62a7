// Runs one function per rank on its own thread and rethrows the first error:
// how the process-level transports are tested inside one gtest binary.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "braid/comm/transport/transport.h"
#include "tests/testing/first_error.h"

namespace braid::comm::testing {

inline void on_threads(int n, const std::function<void(int)>& fn) { test::run_threads_first_error(n, fn); }

// The transports of one group; closed in parallel, as separate processes
// would be (each close waits briefly for its peers to hang up too).
struct Group {
  std::vector<std::unique_ptr<Transport>> ranks;
  Group() = default;
  Group(Group&&) = default;
  Group& operator=(Group&&) = default;
  ~Group() {
    on_threads(static_cast<int>(ranks.size()), [&](int r) { ranks[r].reset(); });
  }
  std::unique_ptr<Transport>& operator[](size_t r) { return ranks[r]; }
  size_t size() const { return ranks.size(); }
};

// Builds a group: make(rank) runs on rank's thread (set-up needs all ranks at once).
inline Group make_thread_group(int n, const std::function<std::unique_ptr<Transport>(int)>& make) {
  Group g;
  g.ranks.resize(n);
  on_threads(n, [&](int r) { g.ranks[r] = make(r); });
  return g;
}

inline void run_on_ranks(Group& group, const std::function<void(Transport&)>& fn) {
  on_threads(static_cast<int>(group.size()), [&](int r) { fn(*group[r]); });
}

}  // namespace braid::comm::testing
