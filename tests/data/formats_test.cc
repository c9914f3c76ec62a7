#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "braid/data/csv.h"
#include "braid/data/libsvm.h"
#include "braid/data/text.h"
#include "tests/data/temp_dir.h"
#include "tests/testing/error_message.h"

namespace braid::data {
namespace {

using test::TempDir;

TEST(Csv, HeaderLabelColumnAndValues) {
  TempDir dir;
  test::write_text(dir.file("d.csv"), "a,label,b\n1.5, 2 ,-3\n\n4,0,5e1\r\n");
  CsvDataset ds(dir.file("d.csv"), {.label_column = 1});
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.spec().input_shape, (Shape{2}));
  Example e = ds.get(0);
  EXPECT_EQ(e.input.to_vector<float>(), (std::vector<float>{1.5f, -3.0f}));
  EXPECT_EQ(e.target.item(), 2);
  EXPECT_EQ(ds.get(1).input.to_vector<float>(), (std::vector<float>{4.0f, 50.0f}));

  test::write_text(dir.file("r.csv"), "0.5,1,2.25\n");
  CsvDataset reg(dir.file("r.csv"), {.regression = true});
  EXPECT_EQ(reg.spec().target_dtype, DType::f32);
  EXPECT_FLOAT_EQ(static_cast<float>(reg.get(0).target.item()), 2.25f);
}

TEST(Csv, ErrorsNameFileLineColumn) {
  TempDir dir;
  std::string path = dir.file("bad.csv");
  test::write_text(path, "1,2,3\n4,x5,6\n");
  std::string msg = test::message_of<IoError>([&] { CsvDataset ds(path); });
  EXPECT_NE(msg.find(path + ":2:3: expected a number, found 'x5'"), std::string::npos) << msg;

  test::write_text(path, "1,2,3\n4,5\n");
  msg = test::message_of<IoError>([&] { CsvDataset ds(path); });
  EXPECT_NE(msg.find(path + ":2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 3 columns"), std::string::npos) << msg;

  test::write_text(path, "1,2,3\n4,5,2.5\n");
  msg = test::message_of<IoError>([&] { CsvDataset ds(path); });
  EXPECT_NE(msg.find(path + ":2:5: expected an integer class label"), std::string::npos) << msg;
  EXPECT_NE(test::message_of<IoError>([&] { CsvDataset ds(dir.file("missing.csv")); }).find("missing.csv"), std::string::npos);
}

TEST(Libsvm, SparseRowsDenseExamplesAndClasses) {
  TempDir dir;
  test::write_text(dir.file("d.svm"), "+1 1:0.5 4:2  # comment\n-1 2:-1\n\n# only a comment\n+1\n");
  LibsvmDataset ds(dir.file("d.svm"), {.class_targets = true});
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.features(), 4);
  EXPECT_EQ(ds.nonzeros(), 3);
  auto r = ds.row(0);
  EXPECT_EQ(std::vector<int32_t>(r.indices.begin(), r.indices.end()), (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(r.label, 1.0f);
  EXPECT_EQ(ds.get(0).input.to_vector<float>(), (std::vector<float>{0.5f, 0, 0, 2}));
  EXPECT_EQ(ds.get(1).input.to_vector<float>(), (std::vector<float>{0, -1, 0, 0}));
  EXPECT_EQ(ds.classes(), (std::vector<float>{-1, 1}));
  EXPECT_EQ(ds.get(0).target.item(), 1);
  EXPECT_EQ(ds.get(1).target.item(), 0);
  LibsvmDataset raw(dir.file("d.svm"), {.features = 10});
  EXPECT_EQ(raw.spec().input_shape, (Shape{10}));
  EXPECT_EQ(raw.get(1).target.item(), -1.0);
}

TEST(Libsvm, ErrorsNameFileLineColumn) {
  TempDir dir;
  std::string path = dir.file("bad.svm");
  auto expect = [&](const std::string& text, const std::string& want) {
    test::write_text(path, text);
    std::string msg = test::message_of<IoError>([&] { LibsvmDataset ds(path); });
    EXPECT_NE(msg.find(path + ":" + want), std::string::npos) << msg;
  };
  expect("1 1:1\n2 3:1 2:1\n", "2:7: feature index 2 after 3");
  expect("1 1:1\nx 1:1\n", "2:1: expected a numeric label");
  expect("1 1:1 2\n", "1:7: expected <index>:<value>");
  expect("1 1:1 0:4\n", "1:7: feature index 0 outside");
  expect("1 1:1 3:abc\n", "1:9: expected a feature value, found 'abc'");
  test::write_text(path, "1 5:1\n");
  EXPECT_NE(test::message_of<IoError>([&] { LibsvmDataset ds(path, {.features = 3}); }).find("exceeds"), std::string::npos);
}

TEST(CharText, WindowsAndVocabulary) {
  auto ds = CharTextDataset::from_string("abcabd", {.context = 3});
  EXPECT_EQ(ds.vocab_size(), 4);
  EXPECT_EQ(ds.size(), 3);  // windows at 0, 1, 2 (each needs context + 1 bytes)
  Example e = ds.get(2);
  EXPECT_EQ(ds.decode(e.input.to_vector<int64_t>()), "cab");
  EXPECT_EQ(ds.decode(e.target.to_vector<int64_t>()), "abd");
  EXPECT_EQ(ds.encode("dab"), (std::vector<int64_t>{3, 0, 1}));
  EXPECT_THROW(ds.encode("z"), ValueError);
  auto strided = CharTextDataset::from_string("0123456789", {.context = 3, .stride = 3});
  EXPECT_EQ(strided.size(), 3);
  EXPECT_EQ(strided.decode(strided.get(2).input.to_vector<int64_t>()), "678");
  EXPECT_THROW(CharTextDataset::from_string("ab", {.context = 2}), IoError);
}

TEST(CharText, FortunesFolder) {
  const char* dir = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(std::string(dir) + "/fortunes")) GTEST_SKIP() << "package fortunes not installed";
  CharTextDataset one(std::string(dir) + "/fortunes", {.context = 64});
  CharTextDataset all(dir, {.context = 64, .stride = 64});
  EXPECT_GT(one.size(), 1000);
  EXPECT_GT(all.size() * 64, one.size());  // the folder holds more text than one file
  EXPECT_LT(all.vocab_size(), 256);
  EXPECT_GE(all.token('e'), 0);
}

}  // namespace
}  // namespace braid::data
