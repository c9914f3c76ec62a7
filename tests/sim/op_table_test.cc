// The op table: its keys and its file (round trip, corrupt and foreign files
// ignored, nothing written when nothing was measured). Its numbers are checked
// against fresh timings in serial/op_table_timing_test.cc, which runs alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/nn/init.h"
#include "braid/ops/ops.h"
#include "braid/sim/op_table.h"

namespace braid::sim {
namespace {

namespace fs = std::filesystem;

// A folder of its own under the system's temporary folder, removed after.
class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / fmt::format("braid_op_table_{}_{}", ::getpid(), counter_++)) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Quick measurements for the tests that check bookkeeping, not numbers.
OpTableOptions quick(std::string path) {
  return {.path = std::move(path), .warmup = 1, .repeats = 1, .max_seconds = 0.01};
}

op::TensorMeta f32(Shape s) { return {std::move(s), DType::f32}; }

TEST(SimOpTable, KeyNamesOpAttributesOperandsAndThreads) {
  const op::Attrs none;
  const op::TensorMeta a = f32({64, 784}), b = f32({256, 784});
  EXPECT_EQ(OpTable::key(op::find("matmul"), {{"transpose_b", int64_t{1}}}, std::vector{a, b}, 2),
            "matmul|transpose_b=1|f32[64,784];f32[256,784]|t2");
  // An omitted optional input is "-"; a scalar's shape is "[]".
  const op::TensorMeta absent{{}, DType::f32, true}, scalar{{}, DType::i64};
  EXPECT_EQ(OpTable::key(op::find("linear"), none, std::vector{a, b, absent}, 1),
            "linear||f32[64,784];f32[256,784];-|t1");
  EXPECT_EQ(OpTable::key(op::find("add"), none, std::vector{scalar, scalar}, 3), "add||i64[];i64[]|t3");
  // Dropout's generator is a process-local address: keyed as 0.
  EXPECT_EQ(OpTable::key(op::find("dropout"), {{"p", 0.5}, {"generator", int64_t{12345}}}, std::vector{a}, 1),
            "dropout|p=0.5, generator=0|f32[64,784]|t1");
}

TEST(SimOpTable, MeasuresAnEntryOnceAndKeepsItAcrossSaveAndReload) {
  TempDir dir;
  const std::string path = dir.file("cache/op_times.json");  // the folder does not exist yet
  const std::vector<op::TensorMeta> in{f32({1000}), f32({1000})};
  double first;
  {
    OpTable table(quick(path));
    EXPECT_EQ(table.size(), 0u);
    first = table.seconds(op::find("add"), {}, in, 1);
    EXPECT_GT(first, 0);
    EXPECT_EQ(table.seconds(op::find("add"), {}, in, 1), first);
    EXPECT_EQ(table.measured(), 1u);
    EXPECT_EQ(table.size(), 1u);
    // Another thread count is another entry.
    table.seconds(op::find("add"), {}, in, 2);
    EXPECT_EQ(table.measured(), 2u);
    table.save();
  }
  ASSERT_TRUE(fs::exists(path));
  OpTable again(quick(path));
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.seconds(op::find("add"), {}, in, 1), first);  // bit for bit, from the file
  EXPECT_EQ(again.measured(), 0u);
  // refresh ignores the file.
  EXPECT_EQ(OpTable({.path = path, .refresh = true}).size(), 0u);
  // Nothing new measured: save() leaves the file alone.
  fs::remove(path);
  again.save();
  EXPECT_FALSE(fs::exists(path));
}

TEST(SimOpTable, IgnoresCorruptAndForeignFilesAndBadEntries) {
  TempDir dir;
  const std::string path = dir.file("op_times.json");
  const std::vector<op::TensorMeta> in{f32({10})};
  // Version 2 is current: 1 (an older table) and 3 (a newer one) are foreign.
  for (const std::string text : {"{\"version\": 2, \"entries\": {\"relu||f32[10]|t1\": 0.5", "\x01\x02 garbage",
                                 "{\"version\": 1, \"entries\": {\"relu||f32[10]|t1\": 0.5}}",
                                 "{\"version\": 3, \"entries\": {\"relu||f32[10]|t1\": 0.5}}",
                                 "{\"version\": \"2\", \"entries\": {\"relu||f32[10]|t1\": 0.5}}",
                                 "[1, 2, 3]", "{\"version\": 2, \"entries\": [0.5]}",
                                 "{\"version\": 2, \"entries\": {\"relu||f32[10]|t1\": 1e999}}"}) {
    SCOPED_TRACE(text);
    write(path, text);
    OpTable table(quick(path));
    EXPECT_EQ(table.size(), 0u);
    EXPECT_NE(table.seconds(op::find("relu"), {}, in, 1), 0.5);  // measured, not read
    table.save();  // replaces the bad file with a good one
    EXPECT_EQ(OpTable(quick(path)).size(), 1u);
  }
  // Entries that are not finite non-negative seconds go; the rest stay.
  write(path, R"({"version": 2, "entries": {"a": -1, "b": "fast", "c": null, "e": [1],
                 "relu||f32[10]|t1": 0.25, "f": 0}})");
  OpTable table(quick(path));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.seconds(op::find("relu"), {}, in, 1), 0.25);
  EXPECT_EQ(table.measured(), 0u);
}

TEST(SimOpTable, RefusesOpsThatTalkToOtherRanks) {
  // Defined once per process (the registry refuses a second definition).
  static const op::OpDef& io = op::define({
      .name = "op_table_test_io",
      .family = "comm",
      .inputs = 1,
      .outputs = 0,
      .effect = op::Effect::io,
      .infer = [](std::span<const op::TensorMeta>, const op::Attrs&) { return std::vector<op::TensorMeta>{}; },
      .kernels = {{.device = Device::cpu, .dtypes = {}, .fn = [](const op::Args&) { return std::vector<Tensor>{}; }}},
  });
  TempDir dir;
  OpTable table(quick(dir.file("t.json")));
  try {
    table.seconds(io, {}, std::vector{f32({4})}, 1);
    FAIL() << "an io op was timed";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("op_table_test_io"), std::string::npos) << e.what();
  }
  EXPECT_EQ(table.size(), 0u);
}

TEST(SimOpTable, DefaultPathFollowsTheCacheVariables) {
  const char* names[] = {"BRAID_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names) saved.push_back(std::getenv(n) ? std::optional<std::string>(std::getenv(n)) : std::nullopt);
  ::setenv("BRAID_CACHE_DIR", "/b", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(default_op_table_path(), "/b/op_times.json");
  ::unsetenv("BRAID_CACHE_DIR");
  EXPECT_EQ(default_op_table_path(), "/x/braid/op_times.json");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_op_table_path(), "/h/.cache/braid/op_times.json");
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i]) {
      ::setenv(names[i], saved[i]->c_str(), 1);
    } else {
      ::unsetenv(names[i]);
    }
  }
}

}  // namespace
}  // namespace braid::sim
