#include <gtest/gtest.h>

#include "braid/data/open.h"
#include "tests/data/temp_dir.h"

namespace braid::data {
namespace {

TEST(OpenDataset, SingleFileFormatsSplitNinetyTen) {
  test::TempDir dir;
  std::string csv;
  for (int i = 0; i < 20; ++i) csv += std::to_string(i) + ",0.5," + std::to_string(i % 3) + "\n";
  test::write_text(dir.file("d.csv"), csv);
  auto train = open_dataset({.name = "csv", .path = dir.file("d.csv"), .train = true});
  auto test = open_dataset({.name = "csv", .path = dir.file("d.csv"), .train = false});
  EXPECT_EQ(train->size(), 18);
  EXPECT_EQ(test->size(), 2);
  EXPECT_EQ(test->get(0).input.to_vector<float>(), (std::vector<float>{18, 0.5f}));  // held-out rows are the last

  test::write_text(dir.file("d.svm"), "-1 1:1\n+1 2:1\n-1 1:2\n+1 2:2\n");
  auto svm = open_dataset({.name = "libsvm", .path = dir.file("d.svm")});
  EXPECT_EQ(svm->spec().target_dtype, DType::i64);  // class ids for cross-entropy
  EXPECT_EQ(svm->size(), 4);  // llround(0.9 * 4) = 4: tiny files keep everything for training

  test::write_text(dir.file("t.txt"), std::string(200, 'a') + "b");
  auto text = open_dataset({.name = "text", .path = dir.file("t.txt"), .context = 8, .stride = 1});
  EXPECT_EQ(text->spec().input_shape, (Shape{8}));
  EXPECT_EQ(text->size(), 174);  // round(0.9 * 193 windows)
  auto tiled = open_dataset({.name = "text", .path = dir.file("t.txt"), .context = 8});
  EXPECT_EQ(tiled->size(), 23);  // stride 0 = context: round(0.9 * 25) non-overlapping windows

  EXPECT_THROW(open_dataset({.name = "imagenet"}), ValueError);
  EXPECT_THROW(Subset(train, 5, 30), IndexError);
}

}  // namespace
}  // namespace braid::data
