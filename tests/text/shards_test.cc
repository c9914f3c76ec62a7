#include "braid/text/shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::text {
namespace {

// The call throws E whose message holds every part.
#define EXPECT_THAT_ERROR(call, E, ...)                                        \
  do {                                                                         \
    const std::string m = test::message_of<E>([&] { (void)(call); });          \
    for (const std::string part : std::vector<std::string> __VA_ARGS__)        \
      EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m; \
  } while (0)

std::vector<uint32_t> iota(uint32_t n, uint32_t mod) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = (i * 7919u) % mod;
  return v;
}

TEST(TokenShards, WriteThenReadBothWidths) {
  test::TempDir dir;
  for (const uint32_t vocab : {1000u, 65536u, 70000u}) {
    ShardWriter w({.prefix = dir.file("v" + std::to_string(vocab)), .vocab_size = vocab, .ids_per_shard = 1000});
    const auto a = iota(600, vocab), b = iota(300, vocab);
    w.add(a);
    w.add(b);
    w.add(a);  // past 1000 ids: a second shard
    const auto paths = w.finish();
    ASSERT_EQ(paths.size(), 2u);
    TokenShard s0(paths[0]), s1(paths[1]);
    EXPECT_EQ(s0.bytes_per_id(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(s0.size(), 900u);
    EXPECT_EQ(s1.size(), 600u);
    EXPECT_EQ(s0.vocab_size(), vocab);
    EXPECT_EQ(std::filesystem::file_size(paths[1]), kShardHeaderBytes + 600u * s1.bytes_per_id());
    std::vector<uint32_t> got(300);
    s0.read(600, got);
    EXPECT_EQ(got, b);
    EXPECT_THROW(s1.read(400, got), IndexError);
  }
}

// The layout docs/text.md states, read by a separate reader in Python.
TEST(TokenShards, APythonReaderReadsWhatTheWriterWrote) {
  test::TempDir dir;
  for (const uint32_t vocab : {50257u, 128256u}) {
    ShardWriter w({.prefix = dir.file("p" + std::to_string(vocab)), .vocab_size = vocab});
    const auto ids = iota(1234, vocab);
    w.add(ids);
    const std::string path = w.finish().at(0);
    const std::string cmd = "python3 " BRAID_TESTS_DIR "/text/read_shard.py " + path;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ASSERT_EQ(pclose(p), 0) << cmd;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["width"], vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(j["vocab"], vocab);
    EXPECT_EQ(j["ids"].get<std::vector<uint32_t>>(), ids);
  }
}

TEST(TokenShards, WindowsOfContextPlusOneNeverCrossAShard) {
  test::TempDir dir;
  ShardWriter w({.prefix = dir.file("c"), .vocab_size = 50000, .ids_per_shard = 100});
  std::vector<uint32_t> ids(100);
  for (uint32_t i = 0; i < 100; ++i) ids[i] = i;
  w.add(ids);
  for (uint32_t i = 0; i < 100; ++i) ids[i] = 1000 + i;
  w.add(std::span(ids).first(50));
  w.finish();
  TokenWindows tw(glob_shards(dir.file("c-*.tok")), {.context = 8});
  EXPECT_EQ(tw.tokens(), 150u);
  EXPECT_EQ(tw.size(), 12u + 6u);  // (100 - 9) / 8 + 1, (50 - 9) / 8 + 1
  std::vector<uint32_t> win(9);
  tw.window(11, win);
  EXPECT_EQ(win.front(), 88u);
  EXPECT_EQ(win.back(), 96u);
  tw.window(12, win);
  EXPECT_EQ(win.front(), 1000u);  // the next shard starts afresh
  TokenWindows strided(glob_shards(dir.file("c-*.tok")), {.context = 8, .stride = 1});
  EXPECT_EQ(strided.size(), 92u + 42u);
  EXPECT_THROW(glob_shards(dir.file("none-*.tok")), IoError);
}

// Resident pages of this process (bytes), from /proc/self/statm.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A 4 GiB shard (sparse: its ids read as 0) served window by window: memory
// grows with the windows read, not with the shard.
TEST(TokenShards, ResidentMemoryIndependentOfShardSize) {
  test::TempDir dir;
  const std::string path = dir.file("big.tok");
  {
    ShardWriter w({.prefix = dir.file("big"), .vocab_size = 1000});
    w.add(std::vector<uint32_t>(8, 1));
    std::filesystem::rename(w.finish().at(0), path);
  }
  const uint64_t count = (uint64_t{4} << 30) / 2;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    unsigned char n[8];
    for (int i = 0; i < 8; ++i) n[i] = static_cast<unsigned char>(count >> (8 * i));
    f.seekp(16);
    f.write(reinterpret_cast<const char*>(n), 8);
  }
  std::filesystem::resize_file(path, kShardHeaderBytes + count * 2);
  const size_t before = resident_bytes();
  TokenWindows tw({path}, {.context = 1024});
  EXPECT_EQ(tw.tokens(), count);
  std::vector<uint32_t> win(1025);
  for (uint64_t i = 1; i <= 2000; ++i) {
    tw.window((i * 1000003) % tw.size(), win);
    ASSERT_EQ(win[5], 0u);
  }
  tw.window(0, win);
  EXPECT_EQ(win[3], 1u);
  // 2000 windows of 2 KiB touch at most 2 pages each: about 16 MB, against 4 GiB mapped.
  EXPECT_LT(resident_bytes() - std::min(before, resident_bytes()), size_t{64} << 20);
}

TEST(TokenShards, TruncatedForeignAndOutOfRangeAreNamed) {
  test::TempDir dir;
  ShardWriter w({.prefix = dir.file("s"), .vocab_size = 300});
  w.add(iota(100, 300));
  const std::string path = w.finish().at(0);

  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_THAT_ERROR(TokenShard{path}, IoError, {path, "truncated", "100 ids"});
  std::filesystem::resize_file(path, 10);
  EXPECT_THAT_ERROR(TokenShard{path}, IoError, {path, "truncated", "10 bytes"});
  std::ofstream(dir.file("foreign.tok")) << "this is not a shard, just some words in a file";
  EXPECT_THAT_ERROR(TokenShard{dir.file("foreign.tok")}, IoError, {"foreign.tok", "magic"});
  EXPECT_THAT_ERROR(TokenShard{dir.file("missing.tok")}, IoError, {"missing.tok"});

  ShardWriter w2({.prefix = dir.file("r"), .vocab_size = 300});
  std::vector<uint32_t> ids(50, 7);
  ids[41] = 299;
  w2.add(ids);
  const std::string p2 = w2.finish().at(0);
  TokenShard s(p2);
  std::vector<uint32_t> out(50);
  s.read(0, out);                                                          // fine under the header's 300
  EXPECT_THAT_ERROR(s.read(0, out, 256), IoError, {p2, "offset 41", "299"});  // a model with 256 ids
  ids[3] = 300;
  EXPECT_THAT_ERROR(w2.add(ids), ValueError, {"300", "position 3"});
}

}  // namespace
}  // namespace braid::text
