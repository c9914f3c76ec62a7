#include "braid/base/median.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(Median, OddAndEvenCounts) {
  EXPECT_EQ(median({3.0}), 3.0);
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(upper_median({4.0, 1.0, 3.0, 2.0}), 3.0);
  EXPECT_EQ(upper_median({9.0, 1.0, 2.0}), 2.0);
}

TEST(Median, OneSlowRunDoesNotMoveIt) {
  EXPECT_EQ(median({1.0, 1.1, 0.9, 1.0, 100.0}), 1.0);
}

TEST(Median, NoValuesIsAnError) {
  EXPECT_THROW(median({}), Error);
  EXPECT_THROW(upper_median({}), Error);
}

}  // namespace
}  // namespace braid
