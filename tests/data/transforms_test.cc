#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "braid/base/error.h"
#include "braid/data/transforms.h"

namespace braid::data {
namespace {

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TEST(Transforms, NormalizePerChannel) {
  std::vector<float> x = {1, 3, 10, 20};
  Generator g;
  Normalize({1, 10}, {2, 5}).apply(x.data(), {2, 1, 2}, g);
  EXPECT_EQ(x, (std::vector<float>{0, 1, 0, 2}));
  EXPECT_THROW(Normalize({1}, {0}), ValueError);
  EXPECT_THROW(Normalize({1, 2, 3}, {1, 1, 1}).apply(x.data(), {2, 1, 2}, g), ValueError);
}

TEST(Transforms, FlipMirrorsRowsAndIsSeeded) {
  std::vector<float> x = iota(6);
  Generator always;
  HorizontalFlip(1.0f).apply(x.data(), {1, 2, 3}, always);
  EXPECT_EQ(x, (std::vector<float>{3, 2, 1, 6, 5, 4}));
  int flips = 0;
  for (uint64_t s = 0; s < 1000; ++s) {
    std::vector<float> y = iota(2);
    Generator g(1, s);
    HorizontalFlip().apply(y.data(), {1, 1, 2}, g);
    flips += y[0] == 2.0f;
  }
  EXPECT_NEAR(flips, 500, 80);
  EXPECT_THROW(HorizontalFlip(1.5f), ValueError);
}

TEST(Transforms, RandomCropShiftsWithinPadding) {
  // Every crop of a 1x4x4 image padded by 1 is the image shifted by (dy, dx)
  // in [-1, 1]^2 with zeros entering; all 9 shifts occur.
  std::set<std::vector<float>> seen;
  const std::vector<float> img = iota(16);
  for (uint64_t s = 0; s < 400; ++s) {
    std::vector<float> x = img;
    Generator g(3, s);
    RandomCrop(1).apply(x.data(), {1, 4, 4}, g);
    bool matched = false;
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        std::vector<float> want(16);
        for (int y = 0; y < 4; ++y)
          for (int c = 0; c < 4; ++c) {
            int sy = y + dy, sx = c + dx;
            want[y * 4 + c] = (sy >= 0 && sy < 4 && sx >= 0 && sx < 4) ? img[sy * 4 + sx] : 0.0f;
          }
        matched |= want == x;
      }
    }
    EXPECT_TRUE(matched);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 9u);
  std::vector<float> flat(4);
  Generator g;
  EXPECT_THROW(RandomCrop(1).apply(flat.data(), {4}, g), ValueError);
}

}  // namespace
}  // namespace braid::data
