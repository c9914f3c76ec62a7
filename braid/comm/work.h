// The one waitable handle (docs/design.md, "comm"). Collectives, send/recv and
// parameter-server push/pull all return a Work. Copies share one completion.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/base/deadline.h"

namespace braid::comm {

class Work {
 public:
  // A work that is not yet complete; `what` names it in timeout messages
  // ("rank 2 allreduce #17 (4 MiB) waiting for rank 3").
  explicit Work(std::string what = {});
  // The same, with the description built only if it is ever needed (a
  // transport posts millions of these; formatting each one costs more than
  // moving a small message).
  using Describe = std::function<std::string()>;
  explicit Work(Describe describe);
  // A work that is already complete (successfully, or with `error`).
  static Work completed(std::exception_ptr error = nullptr);
  // wait() polls this long (after any helper) before it sleeps: the other
  // side usually answers within microseconds, and a futex sleep and wake-up
  // costs more than that.
  static constexpr std::chrono::microseconds kSpinBeforeSleep{20};

  bool done() const;
  // Blocks until done or until `deadline`; rethrows the work's error, throws
  // TimeoutError naming the work when the deadline passes first.
  void wait(Deadline deadline) const;
  // The error the work finished with, if any (null while running).
  std::exception_ptr error() const;
  const std::string& what() const;

  // Completes the work; the first call wins. Callbacks run on the caller's thread.
  void complete(std::exception_ptr error = nullptr) const;
  // Runs fn(error) once the work is done (at once if it already is).
  void on_done(std::function<void(std::exception_ptr)> fn) const;
  // Replaces the description used in timeout messages.
  void describe(std::string what) const;
  // wait() first calls helper(*this, deadline) in the waiting thread, so the
  // waiter can do the work itself rather than sleep until another thread has
  // (a communicator runs a queued collective there; a stream transport reads
  // the peer's channel). The helper may return before the work is done.
  using Helper = std::function<void(const Work&, Deadline)>;
  void help_with(Helper helper) const;
  // wait() without the helper (for helpers that end up sleeping).
  void sleep_until_done(Deadline deadline) const;

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> done{false};  // written under mu; read without it by pollers
    std::exception_ptr error;
    std::string what;
    Describe describe;  // builds `what` on first use
    std::vector<std::function<void(std::exception_ptr)>> callbacks;
    // Shared so wait() can take it out from under the lock without copying
    // the function (and its heap-held captures) on every wait.
    std::shared_ptr<const Helper> helper;
  };
  std::shared_ptr<State> state_;
};

// Waits for all works; rethrows the first error.
void wait_all(const std::vector<Work>& works, Deadline deadline);

}  // namespace braid::comm
