#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "braid/data/fashion_mnist.h"
#include "braid/data/file_bytes.h"
#include "braid/data/idx.h"
#include "tests/data/temp_dir.h"
#include "tests/testing/error_message.h"

namespace braid::data {
namespace {

using test::TempDir;

// IDX bytes for a u8 array of the given dims holding 0, 1, 2, ...
std::vector<unsigned char> idx_bytes(std::vector<uint32_t> dims) {
  std::vector<unsigned char> b = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(d >> s));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>(i % 251));
  return b;
}

TEST(Idx, ReadsGzipAndPlain) {
  TempDir dir;
  auto raw = idx_bytes({3, 4, 5});
  test::write_bytes(dir.file("a.gz"), test::gzip_bytes(raw));
  test::write_bytes(dir.file("a"), raw);
  for (const char* name : {"a.gz", "a"}) {
    IdxArray a = read_idx(dir.file(name));
    EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 4, 5}));
    ASSERT_EQ(a.values.size(), 60u);
    EXPECT_EQ(a.values[59], 59);
  }
}

TEST(Idx, TruncatedGzipNamesFileAndByte) {
  TempDir dir;
  auto gz = test::gzip_bytes(idx_bytes({100, 28, 28}));
  gz.resize(gz.size() / 2);
  test::write_bytes(dir.file("t.gz"), gz);
  std::string msg = test::message_of<IoError>([&] { read_idx(dir.file("t.gz")); });
  EXPECT_NE(msg.find(dir.file("t.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated gzip"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte " + std::to_string(gz.size())), std::string::npos) << msg;
}

TEST(Idx, CorruptGzipNamesFileAndByte) {
  TempDir dir;
  auto gz = test::gzip_bytes(idx_bytes({10, 28, 28}));
  for (size_t i = 20; i < 40; ++i) gz[i] ^= 0x5a;  // inside the deflate stream
  test::write_bytes(dir.file("c.gz"), gz);
  std::string msg = test::message_of<IoError>([&] { read_idx(dir.file("c.gz")); });
  EXPECT_NE(msg.find(dir.file("c.gz")), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("corrupt gzip data at compressed byte") != std::string::npos ||
              msg.find("truncated gzip") != std::string::npos) << msg;
}

TEST(Idx, CrcMismatchIsCorrupt) {
  TempDir dir;
  auto gz = test::gzip_bytes(idx_bytes({2, 2}));
  gz[gz.size() - 6] ^= 0xff;  // the gzip trailer's CRC-32
  test::write_bytes(dir.file("crc.gz"), gz);
  std::string msg = test::message_of<IoError>([&] { read_idx(dir.file("crc.gz")); });
  EXPECT_NE(msg.find("corrupt gzip data"), std::string::npos) << msg;
}

TEST(Idx, TruncatedAndMalformedIdx) {
  TempDir dir;
  auto raw = idx_bytes({4, 4});
  raw.resize(raw.size() - 3);
  test::write_bytes(dir.file("short"), raw);
  std::string msg = test::message_of<IoError>([&] { read_idx(dir.file("short")); });
  EXPECT_NE(msg.find("truncated IDX data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("from byte 12"), std::string::npos) << msg;

  test::write_bytes(dir.file("magic"), {1, 0, 8, 1, 0, 0, 0, 1, 7});
  msg = test::message_of<IoError>([&] { read_idx(dir.file("magic")); });
  EXPECT_NE(msg.find("not an IDX file"), std::string::npos) << msg;

  test::write_bytes(dir.file("type"), {0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  msg = test::message_of<IoError>([&] { read_idx(dir.file("type")); });
  EXPECT_NE(msg.find("at byte 2"), std::string::npos) << msg;

  raw = idx_bytes({2});
  raw.push_back(9);
  test::write_bytes(dir.file("long"), raw);
  msg = test::message_of<IoError>([&] { read_idx(dir.file("long")); });
  EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
}

TEST(FashionMnist, MissingDatasetNamesPathAndPackage) {
  TempDir dir;
  std::string msg = test::message_of<IoError>([&] { FashionMnist ds({.dir = dir.path().string()}); });
  EXPECT_NE(msg.find(dir.file("train-images-idx3-ubyte.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
}

TEST(FashionMnist, SyntheticFilesAndLabelCheck) {
  TempDir dir;
  test::write_bytes(dir.file("t10k-images-idx3-ubyte.gz"), test::gzip_bytes(idx_bytes({3, 28, 28})));
  test::write_bytes(dir.file("t10k-labels-idx1-ubyte.gz"), test::gzip_bytes({0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9}));
  FashionMnist ds({.dir = dir.path().string(), .train = false, .normalize = false});
  ASSERT_EQ(ds.size(), 3);
  Example e = ds.get(2);
  EXPECT_EQ(e.input.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.target.item(), 9);
  EXPECT_FLOAT_EQ(e.input.data<float>()[5], static_cast<float>((2 * 784 + 5) % 251) / 255.0f);
  EXPECT_THROW(ds.get(3), IndexError);

  test::write_bytes(dir.file("t10k-labels-idx1-ubyte.gz"), test::gzip_bytes({0, 0, 8, 1, 0, 0, 0, 3, 7, 10, 9}));
  std::string msg = test::message_of<IoError>([&] { FashionMnist bad({.dir = dir.path().string(), .train = false}); });
  EXPECT_NE(msg.find("label 10 at byte 9"), std::string::npos) << msg;
}

TEST(FashionMnist, RealTrainingSet) {
  if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "package dataset-fashion-mnist not installed";
  }
  FashionMnist raw({.normalize = false});
  ASSERT_EQ(raw.size(), 60000);
  // The documented normalisation constants are this set's pixel mean and std.
  double sum = 0, sq = 0;
  std::vector<float> x(784);
  int64_t label;
  std::vector<int64_t> counts(10);
  for (int64_t i = 0; i < raw.size(); ++i) {
    raw.read(i, reinterpret_cast<std::byte*>(x.data()), reinterpret_cast<std::byte*>(&label));
    for (float v : x) { sum += v; sq += double{v} * v; }
    ++counts.at(static_cast<size_t>(label));
  }
  double n = 60000.0 * 784, mean = sum / n;
  EXPECT_NEAR(mean, 0.2860, 5e-4);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 0.3530, 5e-4);
  for (int64_t c : counts) EXPECT_EQ(c, 6000);  // the classes are balanced

  FashionMnist norm({.train = false});
  EXPECT_EQ(norm.size(), 10000);
}

}  // namespace
}  // namespace braid::data
