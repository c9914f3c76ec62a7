// Choosing an implementation by measuring it on the real work.
//
// The first calls with a new key (a shape, a pass, a thread count) rotate
// through the candidates, timing each kTrials times; the fastest minimum wins
// for the rest of the process. The minimum of three is robust to other
// processes sharing the cores, and the first call of a library also pays its
// one-time costs (JIT code generation, thread start).
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "braid/base/thread_pool.h"

namespace braid::cpu {

// Runs the calling thread's parallel regions on one thread while alive. (On
// shared cores a small kernel can win on one thread: a descheduled worker
// stalls every barrier.)
class SingleThread {
 public:
  explicit SingleThread(bool on) : saved_(on ? num_threads() : 0) {
    if (on) set_num_threads(1);
  }
  ~SingleThread() {
    if (saved_ > 0) set_num_threads(saved_);
  }
  SingleThread(const SingleThread&) = delete;
  SingleThread& operator=(const SingleThread&) = delete;

 private:
  int saved_;
};

template <class Key, int kMaxCandidates>
class OnlineTuner {
 public:
  static constexpr int kTrials = 3;

  // Calls run(candidate) with the settled candidate for `key`, or, while
  // tuning, with the least-measured of the first `candidates`, and times it.
  template <class Run>
  void run(const Key& key, int candidates, Run&& run) {
    int slot;
    bool settled;
    {
      std::lock_guard lock(mu_);
      Tuning& tu = table_[key];
      settled = tu.choice >= 0;
      slot = tu.choice;
      if (!settled) {
        slot = 0;
        for (int i = 1; i < candidates; ++i) {
          if (tu.calls[i] < tu.calls[slot]) slot = i;
        }
      }
    }
    const auto start = std::chrono::steady_clock::now();
    run(slot);
    if (settled) return;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(mu_);
    Tuning& tu = table_[key];
    if (tu.choice >= 0) return;  // another thread finished tuning
    tu.calls[slot] += 1;
    tu.best[slot] = std::min(tu.best[slot], sec);
    bool done = true;
    int winner = 0;
    for (int i = 0; i < candidates; ++i) {
      done = done && tu.calls[i] >= kTrials;
      if (tu.best[i] < tu.best[winner]) winner = i;
    }
    if (done) tu.choice = winner;
  }

  // The settled candidate for `key`, or -1 while it is still being measured.
  int choice(const Key& key) const {
    std::lock_guard lock(mu_);
    auto it = table_.find(key);
    return it == table_.end() ? -1 : it->second.choice;
  }

 private:
  struct Tuning {
    int calls[kMaxCandidates] = {};
    double best[kMaxCandidates];  // seconds
    int choice = -1;
    Tuning() { std::fill(best, best + kMaxCandidates, 1e30); }
  };
  mutable std::mutex mu_;
  std::map<Key, Tuning> table_;
};

}  // namespace braid::cpu
