// Waiting on a 32-bit word that another thread or process changes: a spin
// hint for short waits and the Linux futex for long ones. The futex calls are
// not FUTEX_PRIVATE, so the word may live in memory shared between processes
// (shm rings, the shared-memory collective arena).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace braid {

// What a thread spinning on a word does between two looks.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Sleeps while `word` still holds `expected`, for at most `timeout`; returns
// early on futex_wake or a signal (callers re-check their condition).
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds timeout) {
  const long us = static_cast<long>(timeout.count());
  timespec ts{us / 1000000, (us % 1000000) * 1000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes every thread sleeping on `word`.
inline void futex_wake(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps on `word` until ready() holds (the part of a wait after spinning).
// Whoever makes ready() true then changes `word` and calls futex_wake when it
// sees `sleepers` non-zero, after a seq_cst fence or store: this side counts
// itself in `sleepers` before it reads `word` and re-checks, so one of the
// two sees the other. Each nap lasts at most `nap`; check() runs before every
// nap and may throw (the side waited for died, the channel shut down).
// Returns false once `until` has passed.
template <class Ready, class Check>
bool futex_sleep_until(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, Ready&& ready, Check&& check,
                       std::chrono::steady_clock::time_point until, std::chrono::microseconds nap) {
  while (true) {
    check();
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return ready();
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = word.load(std::memory_order_seq_cst);
    if (!ready()) {
      futex_wait(word, seen, std::min(nap, std::chrono::ceil<std::chrono::microseconds>(until - now)));
    }
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return true;
  }
}

}  // namespace braid
