// Naming stragglers: a rank is named once it is `ratio` times slower than the
// median of the others for `windows` exchanges in a row, once per streak.
#include <gtest/gtest.h>

#include "braid/train/straggler.h"

namespace braid::train {
namespace {

TEST(StragglerWatch, NamesAPersistentlySlowRankOncePerStreak) {
  StragglerWatch w({.every = 10, .ratio = 1.5, .windows = 2});
  for (int s = 1; s <= 9; ++s) {
    w.add(10);
    EXPECT_FALSE(w.due(s));
  }
  w.add(10);
  ASSERT_TRUE(w.due(10));
  EXPECT_DOUBLE_EQ(w.mean_ms(), 10);
  // Window 1: rank 2 is slow, not yet named.
  EXPECT_TRUE(w.judge(10, {10, 11, 40, 9}).empty());
  // Window 2: named, with its figures.
  w.add(1);
  const auto named = w.judge(20, {10, 11, 40, 9});
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].rank, 2);
  EXPECT_DOUBLE_EQ(named[0].others_median_ms, 10);
  EXPECT_DOUBLE_EQ(named[0].ratio, 4);
  EXPECT_EQ(named[0].windows, 2);
  EXPECT_EQ(named[0].window_steps, 1);
  EXPECT_NE(named[0].message().find("straggler: rank 2 works 40.0 ms per step, 4.0x the median"), std::string::npos)
      << named[0].message();
  // Still slow: not named again; recovered, then slow twice more: named again.
  EXPECT_TRUE(w.judge(30, {10, 11, 40, 9}).empty());
  EXPECT_TRUE(w.judge(40, {10, 11, 12, 9}).empty());
  EXPECT_TRUE(w.judge(50, {10, 11, 40, 9}).empty());
  EXPECT_EQ(w.judge(60, {10, 11, 40, 9}).size(), 1u);
}

TEST(StragglerWatch, EvenlyMatchedRanksAndSingleRanksAreNeverNamed) {
  StragglerWatch w({.every = 1, .ratio = 1.5, .windows = 1});
  EXPECT_TRUE(w.judge(1, {10, 14, 12}).empty());  // 14 / 11 < 1.5
  EXPECT_TRUE(w.judge(2, {10}).empty());
  EXPECT_TRUE(w.judge(3, {0, 0}).empty());  // no work measured: no ratio
  EXPECT_EQ(w.judge(4, {10, 16}).size(), 1u);  // two ranks: the other's figure is the median
  StragglerWatch off({.every = 0});
  off.add(5);
  EXPECT_FALSE(off.due(100));
}

}  // namespace
}  // namespace braid::train
