// A rank that never joins a collective: every other rank fails within its
// timeout, and the error names the op, the sequence number and the missing rank.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

struct Outcome {
  std::string message;
  double seconds = 0;
};

// p ranks; `missing` does the first barrier (if `alive`) and then never joins
// the all-reduce (#2) the others run with `algorithm` and a 1 s timeout.
std::vector<Outcome> run_with_missing_rank(int p, int missing, bool alive, Algorithm algorithm) {
  auto world = InprocWorld::create(p);
  std::vector<Communicator> comms(p);
  for (int r = 0; r < p; ++r)
    if (r != missing || alive) comms[r] = Communicator(std::shared_ptr<Transport>(world->transport(r)));
  std::vector<Outcome> out(p);
  std::vector<std::vector<float>> bufs(p, std::vector<float>(1000, 1.0f));
  std::latch others_done(p - 1);
  on_threads(p, [&](int r) {
    if (r == missing) {
      if (alive) comms[r].barrier({.timeout = 10s}).wait(Deadline::after(20s));
      others_done.wait();  // stays alive (and answering) but never joins #2
      return;
    }
    try {
      if (alive) comms[r].barrier({.timeout = 10s}).wait(Deadline::after(20s));
      const auto t0 = Clock::now();
      try {
        comms[r].allreduce(bufs[r], {.algorithm = algorithm, .timeout = 1s}).wait(Deadline::after(10s));
        out[r].message = "completed";
      } catch (const TimeoutError& e) {
        out[r].message = e.what();
      }
      out[r].seconds = seconds_since(t0);
    } catch (...) {
      others_done.count_down();
      throw;
    }
    others_done.count_down();
  });
  world->shutdown("test over");  // release the receives still posted for the missing rank
  return out;
}

TEST(MissingRank, EveryOtherRankNamesItWithinTheTimeout) {
  for (Algorithm alg : {Algorithm::ring, Algorithm::halving_doubling, Algorithm::double_binary_tree}) {
    const auto out = run_with_missing_rank(5, 2, true, alg);
    if (alg == Algorithm::ring) std::printf("example: %s\n", out[4].message.c_str());
    for (int r = 0; r < 5; ++r) {
      if (r == 2) continue;
      SCOPED_TRACE(fmt::format("{} rank {}: {}", name(alg), r, out[r].message));
      EXPECT_LT(out[r].seconds, 1.5);
      EXPECT_NE(out[r].message.find(fmt::format("rank {} allreduce #2", r)), std::string::npos);
      EXPECT_NE(out[r].message.find("rank 2 never started #2; its last finished op is barrier #1 (0 bytes)"),
                std::string::npos);
      EXPECT_NE(out[r].message.find("(4000 bytes f32 sum"), std::string::npos);  // 1000 floats
    }
  }
}

TEST(MissingRank, ADeadRankIsReportedAsNotAnswering) {
  const auto out = run_with_missing_rank(3, 0, false, Algorithm::ring);
  for (int r = 1; r < 3; ++r) {
    SCOPED_TRACE(out[r].message);
    EXPECT_LT(out[r].seconds, 1.5);
    EXPECT_NE(out[r].message.find("allreduce #1"), std::string::npos);
    EXPECT_NE(out[r].message.find("rank 0 did not answer"), std::string::npos);
  }
}

// Rank 1 starts 400 ms after rank 0; rank 2 never comes. Rank 0 times out
// first and tells rank 1, which gives up before its own timeout, with a
// TimeoutError (what callers that handle lost peers catch) naming rank 2.
TEST(MissingRank, ARankTheFirstTimeoutReachesGivesUpEarlyWithATimeout) {
  auto world = InprocWorld::create(3);
  std::vector<Communicator> comms;
  for (int r = 0; r < 3; ++r) comms.emplace_back(std::shared_ptr<Transport>(world->transport(r)));
  std::vector<Outcome> out(3);
  std::latch done(2);
  on_threads(3, [&](int r) {
    comms[r].barrier({.timeout = 10s}).wait(Deadline::after(20s));
    if (r == 2) {
      done.wait();
      return;
    }
    if (r == 1) std::this_thread::sleep_for(400ms);
    std::vector<float> buf(100, 1.0f);
    const auto t0 = Clock::now();
    try {
      comms[r].allreduce(buf, {.algorithm = Algorithm::ring, .timeout = 1s}).wait(Deadline::after(10s));
      out[r].message = "completed";
    } catch (const TimeoutError& e) {
      out[r].message = e.what();
    } catch (const Error& e) {
      out[r].message = std::string("not a timeout: ") + e.what();
    }
    out[r].seconds = seconds_since(t0);
    done.count_down();
  });
  world->shutdown("test over");
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(fmt::format("rank {}: {}", r, out[r].message));
    EXPECT_NE(out[r].message.find("rank 2 never started #2"), std::string::npos);
    EXPECT_EQ(out[r].message.find("not a timeout"), std::string::npos);
  }
  EXPECT_NE(out[1].message.find("gave up after"), std::string::npos) << out[1].message;
  EXPECT_LT(out[1].seconds, 0.9);  // its own timeout would have ended it at 1 s
}

}  // namespace
}  // namespace braid::comm::testing
