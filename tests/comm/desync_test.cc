// Ranks that call different collectives are told so (a desync naming both
// calls), fast, on every rank; a failed communicator refuses later calls with
// the first failure's message; every rank dumps its history, and the dumps
// tell the same story offline (`braid inspect history`).
#include <gtest/gtest.h>

#include <filesystem>

#include "braid/comm/explain.h"
#include "braid/comm/history.h"
#include "braid/comm/history_dump.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

struct Outcome {
  std::string message;
  std::string type;  // "desync", "timeout", "failed", "peer", "ok"
  double seconds = 0;
};

std::string type_of(const std::exception& e) {
  if (dynamic_cast<const DesyncError*>(&e)) return "desync";
  if (dynamic_cast<const CommunicatorFailed*>(&e)) return "failed";
  if (dynamic_cast<const TimeoutError*>(&e)) return "timeout";
  if (dynamic_cast<const PeerError*>(&e)) return "peer";
  return "other";
}

// Every rank runs `op(rank, comm)` after a barrier (#1); returns what each saw.
std::vector<Outcome> run(int p, const std::function<Work(int, Communicator&)>& op, const std::string& dir = {}) {
  std::vector<Outcome> out(p);
  run_world(p, [&](int r, Communicator& comm) {
    comm.barrier({.timeout = 10s}).wait(Deadline::after(20s));
    const auto t0 = Clock::now();
    try {
      op(r, comm).wait(Deadline::after(20s));
      out[r].type = "ok";
    } catch (const Error& e) {
      out[r].message = e.what();
      out[r].type = type_of(e);
    }
    out[r].seconds = seconds_since(t0);
  }, [&](int) { return CommOptions{.history_dir = dir}; });
  return out;
}

TEST(Desync, DifferentCollectivesAreNamedOnEveryRankWellBeforeTheTimeout) {
  std::vector<std::vector<float>> big(4, std::vector<float>(1 << 20, 1.0f));  // 4 MiB
  std::vector<float> small(2, 1.0f);                                            // 8 bytes
  const auto out = run(4, [&](int r, Communicator& comm) {
    if (r == 1) return comm.broadcast(small, {.root = 0, .timeout = 5s});
    return comm.allreduce(big[r], {.algorithm = Algorithm::ring, .timeout = 5s});
  });
  std::printf("example: %s\n", out[2].message.c_str());
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(fmt::format("rank {}: {}", r, out[r].message));
    EXPECT_EQ(out[r].type, "desync");
    EXPECT_NE(out[r].message.find("desync at #2: rank 1 is at broadcast #2 (8 bytes, root 0) while ranks 0, 2, 3 "
                                  "are at allreduce #2 (4 MiB f32 sum)"),
              std::string::npos);
    // The failed rank tells the others, so nobody waits out its 5 s timeout.
    EXPECT_LT(out[r].seconds, 2.5);
  }
}

TEST(Desync, SameCollectiveWithDifferentSizesIsADesyncNotASizeMismatch) {
  std::vector<std::vector<float>> bufs{std::vector<float>(4), std::vector<float>(8), std::vector<float>(4)};
  const auto out = run(3, [&](int r, Communicator& comm) {
    return comm.allreduce(bufs[r], {.algorithm = Algorithm::ring, .timeout = 3s});
  });
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(fmt::format("rank {}: {}", r, out[r].message));
    EXPECT_EQ(out[r].type, "desync");
    EXPECT_NE(out[r].message.find("rank 1 is at allreduce #2 (32 bytes f32 sum) while ranks 0, 2 are at allreduce "
                                  "#2 (16 bytes f32 sum)"),
              std::string::npos);
  }
}

TEST(FailedCommunicator, RefusesEveryLaterCallAtOnceWithTheFirstMessage) {
  std::vector<std::vector<float>> bufs{std::vector<float>(4), std::vector<float>(8)};
  run_world(2, [&](int r, Communicator& comm) {
    std::string first;
    try {
      comm.allreduce(bufs[r], {.algorithm = Algorithm::ring, .timeout = 3s}).wait(Deadline::after(10s));
    } catch (const DesyncError& e) {
      first = e.what();
    }
    ASSERT_FALSE(first.empty());
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      try {
        comm.barrier({.timeout = 3s}).wait(Deadline::after(10s));
        ADD_FAILURE() << "a barrier on a failed communicator completed";
      } catch (const CommunicatorFailed& e) {
        EXPECT_LT(seconds_since(t0), 0.05);
        EXPECT_NE(std::string(e.what()).find(fmt::format("rank {} barrier #{} refused", r, 2 + i)), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find(first), std::string::npos) << e.what();
      }
    }
  });
}

TEST(History, DumpsOneFilePerRankAndTheyTellTheSameStory) {
  const std::string dir = ::testing::TempDir() + "/braid_history_dump";
  std::filesystem::remove_all(dir);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(256));
  std::vector<double> wrong(3);
  run(3, [&](int r, Communicator& comm) {
    if (r == 2) return comm.allreduce(wrong, {.algorithm = Algorithm::ring, .timeout = 3s});  // f64: other dtype
    return comm.allreduce(bufs[r], {.algorithm = Algorithm::ring, .timeout = 3s});
  }, dir);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(std::filesystem::exists(fmt::format("{}/rank-{}.json", dir, r))) << r;
  const auto stories = history_stories(read_history_dumps(dir));
  ASSERT_EQ(stories.size(), 1u);
  const CommStory& s = stories[0];
  EXPECT_EQ(s.seq, 2u);
  EXPECT_TRUE(s.explanation.desync);
  EXPECT_NE(s.explanation.text.find("rank 2 is at allreduce #2 (24 bytes f64 sum) while ranks 0, 1 are at "
                                    "allreduce #2 (1 KiB f32 sum)"),
            std::string::npos)
      << s.explanation.text;
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(s.ops[r].size(), 2u);
    EXPECT_EQ(s.ops[r][0].op, "barrier");
    EXPECT_EQ(s.ops[r][0].state, OpState::done);
    EXPECT_EQ(s.ops[r][1].state, OpState::failed);
    EXPECT_GT(s.ops[r][1].ended, s.ops[r][1].started);
  }
  const std::string text = format_stories(stories);
  EXPECT_NE(text.find("first failure: #2"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

TEST(History, KeepsTheNewestOpsAndTheirStates) {
  History h(4);
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    h.queued(seq, {.op = "allreduce", .bytes = seq * 4, .dtype = DType::f32, .reduce = Op::sum,
                   .algorithm = Algorithm::automatic});
    h.started(seq);
    if (seq < 6) h.done(seq);
  }
  h.ran_with(6, Algorithm::ring);
  const auto records = h.records();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records.front().seq, 3u);
  EXPECT_EQ(records.back().algorithm, "ring");
  EXPECT_EQ(records.back().state, OpState::started);
  const Position p = h.position(6);
  EXPECT_EQ(p.asked.name(), "allreduce #6 (24 bytes f32 sum)");
  EXPECT_EQ(p.last_done.seq, 5u);
  EXPECT_EQ(p.queued, 6u);
  EXPECT_TRUE(h.position(1).asked.empty());  // evicted
  // Records survive a round trip through JSON (the dumps).
  EXPECT_EQ(to_json(op_record_from_json(to_json(records.back()))), to_json(records.back()));
}

TEST(Explain, NamesRanksThatNeverStartedAndRanksThatDidNotAnswer) {
  auto at = [](uint64_t seq, const char* op, OpState st) {
    OpRecord r;
    r.seq = seq, r.op = op, r.bytes = 4, r.args = " f32 sum", r.state = st;
    return r;
  };
  Position ahead{.asked = at(7, "allreduce", OpState::started), .current = at(7, "allreduce", OpState::started),
                 .last_done = at(6, "allreduce", OpState::done), .queued = 7};
  Position behind{.asked = {}, .current = at(6, "allreduce", OpState::done), .last_done = at(6, "allreduce", OpState::done),
                  .queued = 6};
  const Explanation x = explain(7, {ahead, behind, std::nullopt, ahead});
  EXPECT_FALSE(x.desync);
  EXPECT_EQ(x.behind, std::vector<int>{1});
  EXPECT_EQ(x.silent, std::vector<int>{2});
  EXPECT_NE(x.text.find("rank 1 never started #7; its last finished op is allreduce #6 (4 bytes f32 sum)"),
            std::string::npos)
      << x.text;
  EXPECT_NE(x.text.find("rank 2 did not answer"), std::string::npos) << x.text;
  EXPECT_EQ(explain(7, {ahead, ahead}).text, "every rank arrived at #7");
  // Known only from its notice (it failed #6 and is gone): where it failed,
  // and no guess about what it finished.
  Position noticed{.asked = {}, .current = at(6, "allreduce", OpState::failed), .last_done = {}, .queued = 6,
                   .from_notice = true};
  EXPECT_EQ(explain(7, {ahead, noticed}).text, "rank 1 failed at allreduce #6 (4 bytes f32 sum) before #7");
}

}  // namespace
}  // namespace braid::comm::testing
