// Runs body(i) for i in [0, n) on n threads and rethrows the first error in
// time, not the first by index. When a thread fails, on_error() runs (a test
// shuts its in-process world down there, so nobody waits for the dead rank);
// the errors the other threads then see are echoes of the first one.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace braid::test {

inline void run_threads_first_error(int n, const std::function<void(int)>& body,
                                    const std::function<void()>& on_error = {}) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (...) {
        {
          std::lock_guard lock(mu);
          if (!first) first = std::current_exception();
        }
        if (on_error) on_error();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace braid::test
