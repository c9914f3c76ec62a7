// allgatherv over world sizes 1-9: blocks of different sizes (empty ones
// included, large ones cut into several chunks) against the blocks every rank
// contributed, and its argument checks.
#include <gtest/gtest.h>

#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

const Deadline kWait() { return Deadline::after(60s); }

class Allgatherv : public ::testing::TestWithParam<int> {};

int64_t value(int r, size_t i) { return r * 1000000 + static_cast<int64_t>(i); }

// Rank r's block size in pattern k: empty, one element, odd, or larger than
// the 1 KiB chunks below (several pieces per block).
size_t block(int k, int r) {
  switch (k) {
    case 0: return static_cast<size_t>(r % 3 == 1 ? 0 : 5 + r);
    case 1: return static_cast<size_t>(r == 0 ? 1 : 0);
    case 2: return static_cast<size_t>(1000 + 377 * r);
    default: return 0;
  }
}

TEST_P(Allgatherv, BlocksOfEveryRankInRankOrder) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) {
    for (int k = 0; k < 4; ++k) {
      std::vector<size_t> counts(p);
      size_t total = 0;
      for (int j = 0; j < p; ++j) total += counts[j] = block(k, j);
      std::vector<int64_t> mine(counts[r]), all(total, -1);
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, i);
      comm.allgatherv(mine, all, counts).wait(kWait());
      size_t at = 0;
      for (int j = 0; j < p; ++j)
        for (size_t i = 0; i < counts[j]; ++i) ASSERT_EQ(all[at++], value(j, i)) << "pattern " << k << " block " << j;
    }
  }, [](int) { return CommOptions{.chunk_bytes = 1024}; });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Allgatherv, ::testing::Range(1, 10));

TEST(AllgathervArgs, RefusesCountsThatDoNotMatch) {
  run_world(2, [&](int, Communicator& comm) {
    std::vector<float> in(3), out(5);
    EXPECT_THROW(comm.allgatherv(in, out, {3}), ValueError);       // one count for two ranks
    EXPECT_THROW(comm.allgatherv(in, out, {4, 4}), ValueError);    // in is not counts[rank]
    EXPECT_THROW(comm.allgatherv(in, out, {3, 3}), ValueError);    // out is not the sum
  });
}

}  // namespace
}  // namespace braid::comm::testing
