// The timeline recorder: spans only while a session is installed, Chrome
// trace-event fields, one row per thread, and the merge of several ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "braid/base/error.h"
#include "braid/base/trace.h"

namespace braid::trace {
namespace {

TEST(Trace, SpansRecordOnlyWhileASessionIsInstalled) {
  Recorder rec(3, "rank 3");
  { Span off("step", "forward"); }
  EXPECT_EQ(active(), nullptr);
  EXPECT_EQ(rec.size(), 0u);
  {
    Session session(&rec);
    EXPECT_EQ(active(), &rec);
    Span span("comm", "allreduce");
    span.arg("bytes", 4096).arg("algorithm", "ring");
    std::thread([] { Span other("comm", "barrier"); }).join();
  }
  EXPECT_EQ(active(), nullptr);
  { Span after("step", "backward"); }
  ASSERT_EQ(rec.size(), 2u);
  const auto j = rec.to_json();
  std::vector<nlohmann::json> spans;
  std::set<int> tids;
  for (const auto& e : j["traceEvents"]) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") spans.push_back(e), tids.insert(e["tid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 3");
    }
  }
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(tids.size(), 2u);  // the other thread has a row of its own
  const auto& ar = spans[0]["name"] == "allreduce" ? spans[0] : spans[1];
  EXPECT_EQ(ar["cat"], "comm");
  EXPECT_EQ(ar["args"]["bytes"], 4096);
  EXPECT_GE(ar["dur"].get<int64_t>(), 0);
}

TEST(Trace, ArgumentsKeepTheirTypesAndTheLastValueOfAKey) {
  Args args;
  EXPECT_TRUE(args.empty());
  args.set("seq", 17);
  args.set("bytes", uint64_t{4} << 30);
  args.set("ratio", 0.25);
  args.set("failed", true);
  args.set("algorithm", "automatic");
  args.set("algorithm", std::string_view("ring"));  // as the communicator names the one it ran
  const auto j = args.to_json();
  EXPECT_EQ(j.size(), 5u);
  EXPECT_EQ(j["seq"], 17);
  EXPECT_EQ(j["bytes"], int64_t{4} << 30);
  EXPECT_EQ(j["ratio"], 0.25);
  EXPECT_EQ(j["failed"], true);
  EXPECT_EQ(j["algorithm"], "ring");
  Args full;
  for (const char* k : {"a", "b", "c", "d", "e", "f", "g", "h"}) full.set(k, 1);
  EXPECT_THROW(full.set("i", 1), Error);  // bounded: a span is not a log
  full.set("a", 2);                       // an existing key still takes a new value
  EXPECT_EQ(full.to_json()["a"], 2);
}

TEST(Trace, MergesEveryRanksFileIntoOneTrace) {
  const std::string dir = ::testing::TempDir() + "/braid_trace_merge";
  std::filesystem::remove_all(dir);
  for (int r = 0; r < 3; ++r) {
    Recorder rec(r, "rank " + std::to_string(r));
    rec.instant("test", "mark");
    rec.write(dir + "/trace/rank-" + std::to_string(r) + ".json");
  }
  const Merged m = merge_folder(dir);
  EXPECT_EQ(m.ranks, (std::vector<int>{0, 1, 2}));
  std::ifstream in(m.path);
  const auto j = nlohmann::json::parse(in);
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(m.events, j["traceEvents"].size());
  // A file that is not a trace is refused, not half-merged.
  std::ofstream(dir + "/trace/rank-3.json") << "{\"not\": 1}";
  EXPECT_THROW(merge_folder(dir), IoError);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(merge_folder(dir), IoError);
}

}  // namespace
}  // namespace braid::trace
