#include "braid/base/futex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace braid {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The waker's side of the protocol futex_sleep_until expects.
void publish(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, std::atomic<bool>& ready) {
  ready.store(true, std::memory_order_seq_cst);
  word.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(word);
}

TEST(FutexSleepUntil, AWakeEndsTheNapLongBeforeItsEnd) {
  std::atomic<uint32_t> word{0}, sleepers{0};
  std::atomic<bool> ready{false};
  int checks = 0;
  std::thread waker([&] {
    while (sleepers.load() == 0) std::this_thread::yield();  // it is asleep (or about to be)
    publish(word, sleepers, ready);
  });
  const auto start = Clock::now();
  const bool got = futex_sleep_until(word, sleepers, [&] { return ready.load(); }, [&] { ++checks; },
                                     Clock::now() + 10s, std::chrono::seconds(5));
  waker.join();
  EXPECT_TRUE(got);
  EXPECT_LT(Clock::now() - start, 2s);  // not the 5 s nap
  EXPECT_GE(checks, 1);
  EXPECT_EQ(sleepers.load(), 0u);
}

TEST(FutexSleepUntil, NobodyComingEndsAtTheDeadlineCheckingEveryNap) {
  std::atomic<uint32_t> word{0}, sleepers{0};
  int checks = 0;
  const auto start = Clock::now();
  const bool got = futex_sleep_until(word, sleepers, [] { return false; }, [&] { ++checks; },
                                     Clock::now() + 250ms, std::chrono::milliseconds(50));
  const auto took = Clock::now() - start;
  EXPECT_FALSE(got);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
  EXPECT_GE(checks, 4);  // about one per 50 ms nap
  EXPECT_EQ(sleepers.load(), 0u);
}

TEST(FutexSleepUntil, ACheckThatThrowsEndsTheWait) {
  std::atomic<uint32_t> word{0}, sleepers{0};
  int checks = 0;
  EXPECT_THROW(futex_sleep_until(word, sleepers, [] { return false; },
                                 [&] {
                                   if (++checks == 3) throw std::runtime_error("peer died");
                                 },
                                 Clock::now() + 10s, std::chrono::milliseconds(10)),
               std::runtime_error);
  EXPECT_EQ(checks, 3);
  EXPECT_EQ(sleepers.load(), 0u);
}

TEST(FutexSleepUntil, AlreadyReadyReturnsAtOnce) {
  std::atomic<uint32_t> word{0}, sleepers{0};
  const auto start = Clock::now();
  EXPECT_TRUE(futex_sleep_until(word, sleepers, [] { return true; }, [] {}, Clock::now() + 10s,
                                std::chrono::seconds(5)));
  EXPECT_LT(Clock::now() - start, 1s);
}

}  // namespace
}  // namespace braid
