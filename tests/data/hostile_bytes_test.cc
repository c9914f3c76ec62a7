// Hostile data files (docs/reliability.md, "Hostile bytes"): inputs that made
// a reader run into undefined behaviour or allocate what the file asked;
// fuzz/idx.cc, fuzz/csv.cc and fuzz/libsvm.cc look for more.
#include <gtest/gtest.h>

#include "braid/data/file_bytes.h"
#include "braid/data/idx.h"
#include "tests/data/temp_dir.h"
#include "tests/testing/error_message.h"

namespace braid::data {
namespace {

std::vector<std::byte> bytes_of(const std::vector<unsigned char>& v) {
  const auto* p = reinterpret_cast<const std::byte*>(v.data());
  return {p, p + v.size()};
}

// The element count was checked after multiplying: 2^40 times a u32
// dimension overflowed int64 (undefined behaviour) before the check ran.
TEST(HostileData, IdxDimensionsWhoseProductOverflowsAreRefused) {
  const auto header = bytes_of({0, 0, 8, 3, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0xff, 0xff, 0xff, 0xff});  // 2^20, 2^20, 2^32 - 1
  const std::string msg = test::message_of<IoError>([&] { parse_idx(header, "x.idx"); });
  EXPECT_NE(msg.find("x.idx: implausible IDX dimension 4294967295 at byte 12"), std::string::npos) << msg;
}

// Found by fuzz/idx.cc: an array with a zero dimension memcpy'd 0 bytes to
// the empty vector's null data(), undefined behaviour (UBSan: nonnull).
TEST(HostileData, IdxWithAZeroDimensionReadsAsEmpty) {
  const auto bytes = bytes_of({0, 0, 8, 2, 0, 0, 0, 0, 0, 1, 0x86, 0xa0});  // 0 x 100000
  const IdxArray a = parse_idx(bytes, "empty.idx");
  EXPECT_EQ(a.dims, (std::vector<int64_t>{0, 100000}));
  EXPECT_TRUE(a.values.empty());
}

// Deflate expands about 1000x: a small file could claim any amount of memory.
TEST(HostileData, GzipDecodingPastTheBoundIsRefused) {
  const std::vector<unsigned char> zeros(8 << 20);
  const auto small = bytes_of(test::gzip_bytes(zeros));
  ASSERT_LT(small.size(), 64u << 10);
  const std::string msg = test::message_of<IoError>([&] { gunzip(small, "bomb.gz", 1 << 20); });
  EXPECT_NE(msg.find("bomb.gz: gzip data decodes to more than 1048576 bytes"), std::string::npos) << msg;
  EXPECT_EQ(gunzip(small, "bomb.gz", 8 << 20).size(), zeros.size());  // exactly at the bound is fine
}

}  // namespace
}  // namespace braid::data
