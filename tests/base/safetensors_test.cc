#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/base/safetensors.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/error_message.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::vector<float> kW = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
const std::vector<int64_t> kStep = {1234};

std::map<std::string, safetensors::TensorRef> sample() {
  return {{"layer.weight", {"F32", {2, 3}, bytes_of(kW)}},
          {"step", {"I64", {}, bytes_of(kStep)}},
          {"empty", {"F32", {0, 4}, {}}}};
}

TEST(Safetensors, RoundTrip) {
  TempDir dir;
  std::string path = dir.file("a.safetensors");
  safetensors::write(path, sample(), {{"format", "pt"}, {"epoch", "3"}});
  safetensors::File f = safetensors::read(path);
  ASSERT_EQ(f.tensors.size(), 3u);
  const auto& w = f.tensors.at("layer.weight");
  EXPECT_EQ(w.dtype, "F32");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(w.data.size(), 24u);
  EXPECT_EQ(std::memcmp(w.data.data(), kW.data(), 24), 0);
  EXPECT_TRUE(f.tensors.at("step").shape.empty());
  EXPECT_TRUE(f.tensors.at("empty").data.empty());
  EXPECT_EQ(f.metadata, (safetensors::Metadata{{"format", "pt"}, {"epoch", "3"}}));
  // Data starts 8-byte aligned.
  std::string raw = slurp(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw[8], '{');
}

TEST(Safetensors, RejectsBadTensors) {
  std::vector<float> three = {1, 2, 3};
  EXPECT_THROW(safetensors::serialize({{"x", {"F32", {2, 2}, bytes_of(three)}}}), ValueError);
  EXPECT_THROW(safetensors::serialize({{"x", {"Q7", {3}, bytes_of(three)}}}), ValueError);
  EXPECT_THROW(safetensors::serialize({{"__metadata__", {"F32", {3}, bytes_of(three)}}}), ValueError);
}

TEST(Safetensors, TruncatedFileIsRefused) {
  auto bytes = safetensors::serialize(sample());
  for (size_t keep : {size_t{0}, size_t{5}, size_t{40}, bytes.size() - 1}) {
    std::string msg = test::message_of<IoError>([&] { safetensors::parse(std::span(bytes).first(keep), "ck"); });
    EXPECT_NE(msg.find("ck: truncated"), std::string::npos) << keep << ": " << msg;
  }
}

TEST(Safetensors, MetadataAloneReadsTheHeaderOnly) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  safetensors::write(path, sample(), {{"epoch", "3"}});
  EXPECT_EQ(safetensors::read_metadata(path), (safetensors::Metadata{{"epoch", "3"}}));
  // A torn data buffer is not its business (read() refuses it); a torn header is, naming the file.
  const std::string raw = slurp(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << raw.substr(0, raw.size() - 4);
  EXPECT_EQ(safetensors::read_metadata(path).at("epoch"), "3");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << raw.substr(0, 20);
  const std::string msg = test::message_of<IoError>([&] { safetensors::read_metadata(path); });
  EXPECT_NE(msg.find(path + ": truncated"), std::string::npos) << msg;
}

TEST(Safetensors, TamperedDataFailsTheChecksum) {
  auto bytes = safetensors::serialize(sample());
  bytes[bytes.size() - 3] ^= std::byte{1};  // a bit of the last tensor
  std::string msg = test::message_of<IoError>([&] { safetensors::parse(bytes, "ck"); });
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
}

TEST(Safetensors, TamperedHeaderIsRefused) {
  auto bytes = safetensors::serialize(sample());
  std::string text(reinterpret_cast<const char*>(bytes.data() + 8), 40);
  bytes[9] = std::byte{'#'};  // breaks the JSON
  std::string msg = test::message_of<IoError>([&] { safetensors::parse(bytes, "ck"); });
  EXPECT_NE(msg.find("corrupt safetensors header"), std::string::npos) << msg;
  auto grown = safetensors::serialize(sample());
  grown.push_back(std::byte{0});
  msg = test::message_of<IoError>([&] { safetensors::parse(grown, "ck"); });
  EXPECT_NE(msg.find("appended"), std::string::npos) << msg;
}

// A header written by hand, as a hostile file would carry it.
std::vector<std::byte> with_header(const std::string& json, size_t data_bytes) {
  std::vector<std::byte> out(8 + json.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(json.size() >> (8 * i));
  std::memcpy(out.data() + 8, json.data(), json.size());
  return out;
}

// The element count of a shape multiplied unchecked: [2^32, 2^32] overflowed
// int64 (undefined behaviour) to 0, so an empty tensor of 2^64 elements was
// accepted and later allocated by whoever turned it into a Tensor.
TEST(Safetensors, ShapeWhoseSizeOverflowsIsRefused) {
  const auto bytes = with_header(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0);
  const std::string msg = test::message_of<IoError>([&] { safetensors::parse(bytes, "ck"); });
  EXPECT_NE(msg.find("corrupt safetensors header: tensor t has offsets [0, 0] for shape"), std::string::npos) << msg;
}

// JSON floats in a shape or data_offsets were converted to integers with a
// cast: 1e30 is undefined behaviour (found by the fuzzer under UBSan), and 0.5
// was read silently as 0. Only non-negative integers that fit are taken.
TEST(Safetensors, NonIntegerShapesAndOffsetsAreRefusedByName) {
  struct Case {
    std::string header;
    size_t data;
    std::string want;
  };
  const std::vector<Case> cases = {
      {R"({"w": {"dtype": "F32", "shape": [1e30], "data_offsets": [0, 4]}})", 4, "tensor w: shape[0] = 1e+30"},
      {R"({"w": {"dtype": "F32", "shape": [0.5], "data_offsets": [0, 0]}})", 0, "tensor w: shape[0] = 0.5"},
      {R"({"w": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})", 4, "tensor w: shape[0] = 1.0"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "tensor w: shape[0] = -1"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4e30]}})", 4, "tensor w: data_offsets[1] = 4e+30"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4, "tensor w: data_offsets[0] = -4"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", 4,
       "tensor w: data_offsets[1] = 18446744073709551615"},
      {R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})", 4, "tensor w: shape is not a list"},
  };
  for (const Case& c : cases) {
    const auto bytes = with_header(c.header, c.data);
    const std::string msg = test::message_of<IoError>([&] { safetensors::parse(bytes, "ck"); });
    EXPECT_NE(msg.find("ck: corrupt safetensors header: " + c.want), std::string::npos) << c.header << "\n" << msg;
    EXPECT_NE(msg.find("non-negative integer"), std::string::npos) << msg;
  }
}

TEST(Safetensors, TooManyDimensionsAreRefused) {
  std::string shape = "1";
  for (int i = 0; i < 64; ++i) shape += ",1";  // 65 dimensions
  const auto bytes = with_header(R"({"t": {"dtype": "U8", "shape": [)" + shape + R"(], "data_offsets": [0, 1]}})", 1);
  const std::string msg = test::message_of<IoError>([&] { safetensors::parse(bytes, "ck"); });
  EXPECT_NE(msg.find("tensor t has 65 dimensions (at most 64)"), std::string::npos) << msg;
}

TEST(Safetensors, PythonReadsTheFormat) {
  // An independent reader: Python's struct + json (+ numpy for the values),
  // following the published format; the safetensors package, when present, too.
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  std::string path = dir.file("p.safetensors");
  safetensors::write(path, sample(), {{"note", "hi"}});
  std::string script = dir.file("check.py");
  std::ofstream(script) << R"(import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = h.pop('__metadata__')
assert meta['note'] == 'hi', meta
spans = sorted(tuple(v['data_offsets']) for v in h.values())
end = 0
for b, e in spans:
    assert b == end, spans
    end = e
assert end == len(data)
import numpy as np
w = h['layer.weight']
b, e = w['data_offsets']
arr = np.frombuffer(data[b:e], dtype='<f4').reshape(w['shape'])
print(sorted(h), arr.tolist(), int(np.frombuffer(data[slice(*h['step']['data_offsets'])], '<i8')[0]))
try:
    from safetensors.numpy import load_file
    print('package', sorted(load_file(sys.argv[1])))
except ImportError:
    pass
)";
  std::string cmd = "/usr/bin/python3 " + script + " " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("['empty', 'layer.weight', 'step'] [[1.5, -2.0, 3.25], [0.0, 0.0010000000474974513, 7.0]] 1234"),
            std::string::npos) << out;
}

TEST(AtomicFile, CommitReplacesAndAbandonLeavesTheOldFile) {
  TempDir dir;
  std::string path = dir.file("f.txt");
  write_file_atomic(path, "first");
  EXPECT_EQ(slurp(path), "first");
  {
    AtomicFile f(path);
    f.write("second, never committed");
    EXPECT_TRUE(fs::exists(f.temp_path()));
  }  // destroyed without commit, as when an exception interrupts a save
  EXPECT_EQ(slurp(path), "first");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator{}), 1);  // no temp left
  AtomicFile g(path);
  g.write("third");
  g.commit();
  EXPECT_EQ(slurp(path), "third");
  EXPECT_THROW(AtomicFile(dir.file("no/such/dir/x")), IoError);
}

}  // namespace
}  // namespace braid
