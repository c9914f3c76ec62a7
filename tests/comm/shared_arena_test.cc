// The shared-memory all-reduce's failure modes (its results are checked with
// every other algorithm in collectives_allreduce_test.cc): ranks that disagree
// about the buffer, a rank that stops coming, and the automatic choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <latch>

#include "braid/comm/history.h"
#include "braid/comm/transport/faulty.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

constexpr AllreduceOptions kShared{.algorithm = Algorithm::shared_memory, .timeout = 10s};

TEST(SharedMemoryAllreduce, RanksThatDisagreeAboutTheSizeGetADesyncNotAHang) {
  std::vector<std::string> errors(3);
  run_world(3, [&](int r, Communicator& comm) {
    std::vector<float> ok(1000, 1.0f);
    comm.allreduce(ok, kShared).wait(Deadline::after(20s));  // sets the arena up
    std::vector<float> buf(r == 1 ? 700 : 1000, 1.0f);
    const auto t0 = Clock::now();
    try {
      comm.allreduce(buf, kShared).wait(Deadline::after(20s));
    } catch (const DesyncError& e) {
      errors[r] = e.what();
    }
    EXPECT_LT(seconds_since(t0), 5.0);
    // The communicator stays failed: named or not, later calls are refused.
    EXPECT_THROW(comm.allreduce(ok, kShared).wait(Deadline::after(20s)), CommunicatorFailed);
    EXPECT_THROW(comm.allreduce(ok, {.timeout = 10s}).wait(Deadline::after(20s)), CommunicatorFailed);
    EXPECT_NE(comm.choose_allreduce(4000), Algorithm::shared_memory);  // the arena is off
  });
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(errors[r]);
    EXPECT_NE(errors[r].find("desync at #2: rank 1 is at allreduce #2 (2800 bytes f32 sum) while ranks 0, 2 are at "
                             "allreduce #2 (4000 bytes f32 sum)"),
              std::string::npos);
    // The arena's own check, kept in brackets.
    EXPECT_NE(errors[r].find("shared-memory all-reduce of"), std::string::npos);
    EXPECT_NE(errors[r].find(r == 1 ? "1000 elements" : "700 elements"), std::string::npos);
  }
}

TEST(SharedMemoryAllreduce, ARankThatNeverComesIsNamedWithinTheTimeout) {
  constexpr int p = 4, missing = 2;
  std::vector<std::string> errors(p);
  std::vector<double> seconds(p);
  std::latch others_done(p - 1);
  run_world(p, [&](int r, Communicator& comm) {
    std::vector<float> buf(5000, 1.0f);
    comm.allreduce(buf, kShared).wait(Deadline::after(20s));
    if (r == missing) {
      others_done.wait();
      return;
    }
    const auto t0 = Clock::now();
    try {
      comm.allreduce(buf, {.algorithm = Algorithm::shared_memory, .timeout = 1s}).wait(Deadline::after(10s));
    } catch (const TimeoutError& e) {
      errors[r] = e.what();
    }
    seconds[r] = seconds_since(t0);
    others_done.count_down();
  });
  for (int r = 0; r < p; ++r) {
    if (r == missing) continue;
    SCOPED_TRACE(errors[r]);
    EXPECT_LT(seconds[r], 1.5);
    EXPECT_NE(errors[r].find(fmt::format("rank {} allreduce #2", r)), std::string::npos);
    EXPECT_NE(errors[r].find(fmt::format("waiting for rank {}", missing)), std::string::npos);
  }
}

// On one host `auto` takes the arena: once it is set up a collective sends no
// messages, so it still works after every link is cut (a ring then fails).
TEST(SharedMemoryAllreduce, AutoUsesTheArenaOnOneHost) {
  constexpr int p = 3;
  auto world = InprocWorld::create(p);
  std::vector<FaultyTransport*> faulty(p);
  std::vector<Communicator> comms;
  for (int r = 0; r < p; ++r) {
    auto t = std::make_shared<FaultyTransport>(std::unique_ptr<Transport>(world->transport(r)), FaultPlan{});
    faulty[r] = t.get();
    comms.emplace_back(t);
  }
  on_threads(p, [&](int r) {
    std::vector<float> buf(100000, static_cast<float>(r + 1));
    EXPECT_NE(comms[r].choose_allreduce(buf.size() * 4), Algorithm::shared_memory);  // no arena yet
    comms[r].allreduce(buf, {.op = Op::avg}).wait(Deadline::after(20s));  // sets the arena up
    EXPECT_EQ(comms[r].choose_allreduce(buf.size() * 4), Algorithm::shared_memory);
    faulty[r]->set_plan({.cut = {0, 1, 2}});
    comms[r].allreduce(buf, {.op = Op::sum}).wait(Deadline::after(20s));
    for (float v : buf) ASSERT_EQ(v, 6.0f);
    EXPECT_THROW(comms[r].allreduce(buf, {.algorithm = Algorithm::ring}).wait(Deadline::after(20s)), PeerError);
  });
}

}  // namespace
}  // namespace braid::comm::testing
