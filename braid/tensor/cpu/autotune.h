// Choosing an implementation by measuring it on the real work.
//
// The first calls with a new key (a shape, a pass, a thread count) rotate
// through the candidates, timing each kTrials times; the lowest median wins
// for the rest of the process. The median ignores both the first call of a
// library (JIT code generation, thread start) and a lucky run: a candidate
// whose speed depends on having both cores to itself (a multi-threaded kernel
// on shared cores) is judged by its typical time, not its best one.
// Once every candidate has run kEliminateAfter times, one whose best time is
// over kEliminateFactor times the best of all is dropped: it could not win,
// and its remaining trials only slowed the first steps of a run (with eight
// convolution candidates, a ResNet layer met once a step took 40 steps to
// settle; now about 20).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "braid/base/thread_pool.h"

namespace braid::cpu {

// Kernels that repeat bit for bit (train.deterministic): every tuner runs its
// first candidate, untimed. The candidates sum in different orders, so a
// choice made by timing changes the last bits of results from run to run, and
// a trajectory that should repeat (a resumed job, a bsp job run twice) drifts
// apart after a few dozen steps. Process-wide.
inline std::atomic<bool>& deterministic_kernels_flag() {
  static std::atomic<bool> on{false};
  return on;
}
inline void set_deterministic_kernels(bool on) { deterministic_kernels_flag().store(on); }
inline bool deterministic_kernels() { return deterministic_kernels_flag().load(); }

// Timed calls per candidate before a key settles.
inline constexpr int kTuningTrials = 5;
inline constexpr int kEliminateAfter = 2;
inline constexpr double kEliminateFactor = 1.5;

template <class Key, int kMaxCandidates>
class OnlineTuner {
 public:
  static constexpr int kTrials = kTuningTrials;

  // Calls run(candidate) with the settled candidate for `key`, or, while
  // tuning, with the least-measured of the first `candidates`, and times it.
  template <class Run>
  void run(const Key& key, int candidates, Run&& run) {
    if (deterministic_kernels()) return run(0);
    int slot;
    bool settled;
    {
      std::lock_guard lock(mu_);
      Tuning& tu = table_[key];
      settled = tu.choice >= 0;
      slot = tu.choice;
      if (!settled) {
        slot = -1;
        for (int i = 0; i < candidates; ++i) {
          if (!tu.dropped[i] && (slot < 0 || tu.calls[i] < tu.calls[slot])) slot = i;
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
    if (tu.calls[slot] < kTrials) tu.times[slot][tu.calls[slot]] = sec;
    tu.calls[slot] += 1;
    drop_hopeless(tu, candidates);
    bool done = true;
    for (int i = 0; i < candidates; ++i) done = done && (tu.dropped[i] || tu.calls[i] >= kTrials);
    if (!done) return;
    int winner = -1;
    double best = 1e30;
    for (int i = 0; i < candidates; ++i) {
      if (tu.dropped[i]) continue;
      std::nth_element(tu.times[i], tu.times[i] + kTrials / 2, tu.times[i] + kTrials);
      if (winner < 0 || tu.times[i][kTrials / 2] < best) best = tu.times[i][kTrials / 2], winner = i;
    }
    tu.choice = winner;
  }

  // The settled candidate for `key`, or -1 while it is still being measured.
  int choice(const Key& key) const {
    if (deterministic_kernels()) return 0;
    std::lock_guard lock(mu_);
    auto it = table_.find(key);
    return it == table_.end() ? -1 : it->second.choice;
  }

 private:
  struct Tuning {
    int calls[kMaxCandidates] = {};
    double times[kMaxCandidates][kTrials] = {};  // seconds
    bool dropped[kMaxCandidates] = {};
    int choice = -1;
  };

  // Once every candidate has kEliminateAfter times, drops those whose best is
  // over kEliminateFactor x the best of all (never the best itself).
  static void drop_hopeless(Tuning& tu, int candidates) {
    double best = 1e30;
    for (int i = 0; i < candidates; ++i) {
      if (tu.dropped[i]) continue;
      if (tu.calls[i] < kEliminateAfter) return;
      best = std::min(best, *std::min_element(tu.times[i], tu.times[i] + std::min(tu.calls[i], kTrials)));
    }
    for (int i = 0; i < candidates; ++i) {
      if (tu.dropped[i]) continue;
      const double mine = *std::min_element(tu.times[i], tu.times[i] + std::min(tu.calls[i], kTrials));
      if (mine > kEliminateFactor * best) tu.dropped[i] = true;
    }
  }
  mutable std::mutex mu_;
  std::map<Key, Tuning> table_;
};

}  // namespace braid::cpu
