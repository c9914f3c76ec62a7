// Synthetic images: a pure function of (seed, index), labelled by the colour
// they scatter around, with unit-variance noise.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "braid/data/open.h"
#include "braid/data/synthetic.h"
#include "tests/testing/error_message.h"

namespace braid::data {
namespace {

TEST(SyntheticImages, ExamplesArePureFunctionsOfSeedAndIndex) {
  const SyntheticImages a({.examples = 100, .shape = {3, 8, 6}, .classes = 5, .seed = 7});
  const SyntheticImages b({.examples = 100, .shape = {3, 8, 6}, .classes = 5, .seed = 7});
  const SyntheticImages other({.examples = 100, .shape = {3, 8, 6}, .classes = 5, .seed = 8});
  EXPECT_EQ(a.spec().input_shape, (Shape{3, 8, 6}));
  EXPECT_EQ(a.size(), 100);
  std::set<int64_t> labels;
  for (int64_t i = 0; i < 100; ++i) {
    const Example x = a.get(i), y = b.get(i);
    EXPECT_EQ(x.input.to_vector<float>(), y.input.to_vector<float>()) << i;
    EXPECT_EQ(x.target.to_vector<int64_t>(), y.target.to_vector<int64_t>()) << i;
    labels.insert(x.target.to_vector<int64_t>()[0]);
  }
  EXPECT_EQ(labels, (std::set<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(a.get(0).input.to_vector<float>(), a.get(1).input.to_vector<float>());
  EXPECT_NE(a.get(0).input.to_vector<float>(), other.get(0).input.to_vector<float>());
}

TEST(SyntheticImages, ChannelsScatterAroundTheirClassColour) {
  const SyntheticImages d({.examples = 400, .shape = {2, 32, 32}, .classes = 3, .seed = 1});
  // Per class and channel, every example's mean is the same colour (within
  // the noise of 1024 values: sd 1/32), and the noise has variance 1.
  std::map<std::pair<int64_t, int>, double> colour;
  double sq = 0, n = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    const Example e = d.get(i);
    const int64_t label = e.target.to_vector<int64_t>()[0];
    const std::vector<float> v = e.input.to_vector<float>();
    for (int ch = 0; ch < 2; ++ch) {
      double mean = 0;
      for (int p = 0; p < 1024; ++p) mean += v[ch * 1024 + p];
      mean /= 1024;
      auto [it, fresh] = colour.emplace(std::make_pair(label, ch), mean);
      EXPECT_NEAR(mean, it->second, 0.25) << "example " << i << " channel " << ch;
      for (int p = 0; p < 1024; ++p) sq += (v[ch * 1024 + p] - it->second) * (v[ch * 1024 + p] - it->second);
      n += 1024;
    }
  }
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(SyntheticImages, RefusesBadShapes) {
  EXPECT_EQ(parse_image_shape("3x224x224"), (Shape{3, 224, 224}));
  for (const char* bad : {"3x224", "3x0x2", "ax2x2", "3x2x2x", "", "3x-1x2"}) {
    EXPECT_NE(test::message_of<ValueError>([&] { parse_image_shape(bad); }).find("CxHxW"), std::string::npos) << bad;
  }
  EXPECT_THROW(SyntheticImages({.shape = {3, 4}}), ValueError);
  EXPECT_THROW(SyntheticImages({.classes = 0}), ValueError);
  // Opened by name, split 90/10 in order.
  auto train = open_dataset({.name = "synthetic", .synthetic = {.examples = 50, .shape = {1, 4, 4}, .classes = 2}});
  auto test = open_dataset(
      {.name = "synthetic", .train = false, .synthetic = {.examples = 50, .shape = {1, 4, 4}, .classes = 2}});
  EXPECT_EQ(train->size(), 45);
  EXPECT_EQ(test->size(), 5);
}

}  // namespace
}  // namespace braid::data
