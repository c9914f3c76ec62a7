#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"

namespace braid {
namespace {

TEST(Error, CheckEqPrintsBothValues) {
  try {
    int a = 3, b = 4;
    BRAID_CHECK_EQ(a, b);
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("a == b"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(3 vs 4)"), std::string::npos) << msg;
  }
}

TEST(Error, CheckWithMessage) {
  EXPECT_THROW(BRAID_CHECK(1 == 2, "value {}", 7), Error);
  try {
    BRAID_CHECK(false, "shape {}", std::vector<int>{2, 3});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape [2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(BRAID_CHECK(true));
}

TEST(Error, TypedFailIsCatchableAsBase) {
  EXPECT_THROW(fail<ValueError>("bad {}", 1), ValueError);
  EXPECT_THROW(fail<TimeoutError>("late"), Error);
}

TEST(Deadline, ExpiresAndFormats) {
  auto d = Deadline::after(std::chrono::milliseconds(20));
  EXPECT_FALSE(d.expired());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.remaining(), Duration::zero());
  EXPECT_FALSE(Deadline::never().expired());
  EXPECT_EQ(format_duration(std::chrono::milliseconds(250)), "250 ms");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(1500)), "1.5 s");
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  std::vector<std::atomic<int>> hits(10007);
  parallel_for(0, 10007, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) hits[i]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  int calls = 0;
  parallel_for(0, 5, 100, [&](int64_t lo, int64_t hi) { calls++; EXPECT_EQ(hi - lo, 5); });
  EXPECT_EQ(calls, 1);
}

TEST(Rng, PhiloxKnownAnswer) {
  // Random123 known-answer test for philox4x32-10: counter = key = 0.
  Philox4 r = philox(0, 0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Rng, ReproducibleAndStreamsDiffer) {
  Generator a(42, 0), b(42, 0), c(42, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_u32(), b.next_u32());
  auto s = a.state();
  uint32_t next = a.next_u32();
  Generator d;
  d.set_state(s);
  EXPECT_EQ(d.next_u32(), next);
  std::set<uint32_t> seen;
  int same = 0;
  Generator e(42, 0);
  for (int i = 0; i < 100; ++i) same += e.next_u32() == c.next_u32();
  EXPECT_LT(same, 3);
}

// The bulk draw gives the definition's words from any starting word, for
// lengths that end inside a block, on a lane group's edge and past it, and
// with a counter that crosses 2^32 (its high word must carry).
TEST(Rng, PhiloxFillMatchesTheDefinition) {
  for (uint64_t first : {uint64_t{0}, uint64_t{3}, uint64_t{5}, (uint64_t{1} << 34) - 130}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{67}, size_t{300}}) {
      std::vector<uint32_t> out(n);
      philox_fill(0x1234'5678'9ABC'DEF0ull, 77, first, out);
      for (size_t j = 0; j < n; ++j) ASSERT_EQ(out[j], philox(0x1234'5678'9ABC'DEF0ull, 77, (first + j) / 4)[(first + j) % 4]) << first << " " << j;
    }
  }
}

// The generator caches a Philox block across draws; its words must still be
// word `offset` of block offset / 4, whatever the path to that offset
// (consecutive draws, set_state into the middle of a block, back again), and
// below() must keep the plain rejection rule's values.
TEST(Rng, CachedBlocksAndBelowMatchTheDefinition) {
  Generator g(9, 3);
  for (uint64_t k = 0; k < 41; ++k) EXPECT_EQ(g.next_u32(), philox(9, 3, k / 4)[k % 4]) << k;
  for (uint64_t at : {uint64_t{6}, uint64_t{2}, uint64_t{7}, uint64_t{1} << 40, uint64_t{3}}) {
    g.set_state({9, 3, at});
    EXPECT_EQ(g.next_u32(), philox(9, 3, at / 4)[at % 4]) << at;
    EXPECT_EQ(g.next_u32(), philox(9, 3, (at + 1) / 4)[(at + 1) % 4]) << at;
  }
  auto reference_below = [](Generator& r, uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = r.next_u64();
    while (x >= limit);
    return x % n;
  };
  Generator a(5, 1), b(5, 1);
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{12174}, uint64_t{1} << 63,
                     (uint64_t{1} << 63) + 1, UINT64_MAX - 1, UINT64_MAX}) {
    for (int i = 0; i < 200; ++i) ASSERT_EQ(a.below(n), reference_below(b, n)) << n;
    ASSERT_EQ(a.state().offset, b.state().offset) << n;
  }
}

TEST(Rng, UniformAndNormalMoments) {
  Generator g(7);
  double sum = 0, sq = 0, nsum = 0, nsq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double u = g.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
    double z = g.normal();
    nsum += z;
    nsq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sq / n - 0.25, 1.0 / 12, 0.005);
  EXPECT_NEAR(nsum / n, 0.0, 0.01);
  EXPECT_NEAR(nsq / n, 1.0, 0.02);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(g.below(7), 7u);
}

TEST(Digest, Crc32AndHmacKnownAnswers) {
  EXPECT_EQ(crc32(as_bytes("123456789")), 0xCBF43926u);
  // RFC 4231 test case 2.
  Sha256 mac = hmac_sha256("Jefe", as_bytes("what do ya want for nothing?"));
  EXPECT_EQ(to_hex(std::as_bytes(std::span(mac))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(equal_digests(mac, mac));
  Sha256 other = mac;
  other[5] ^= 1;
  EXPECT_FALSE(equal_digests(mac, other));
}

}  // namespace
}  // namespace braid
