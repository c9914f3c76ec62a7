// A rank whose process dies mid-job (its tcp connections close, as after
// kill -9): every survivor's error names the collective and the dead rank,
// long before the timeout. In a ring a survivor may only see a peer that
// failed first and exited; "connection to rank 2 lost" alone blamed rank 2
// for rank 1's death (the fault matrix, docs/reliability.md).
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "braid/comm/communicator.h"
#include "braid/comm/store/server.h"
#include "braid/comm/transport/registry.h"
#include "tests/comm/thread_ranks.h"

namespace braid::comm::testing {
namespace {

using namespace std::chrono_literals;

TEST(LostPeer, SurvivorsNameTheOpAndTheDeadRankNotTheNeighbourThatExited) {
  constexpr int p = 3, dead = 1;
  StoreServer server({.token = "tok"});
  Group g = make_thread_group(p, [&](int r) {
    Store store({.port = server.port(), .token = "tok", .who = fmt::format("rank {}", r)});
    return make_transport("tcp", &store, {.rank = r, .size = p, .token = "tok", .prefix = "lost",
                                          .connect_timeout = 10000ms});
  });
  std::vector<std::shared_ptr<Transport>> transports;
  for (auto& t : g.ranks) transports.emplace_back(std::move(t));
  std::vector<Communicator> comms;
  for (int r = 0; r < p; ++r) comms.emplace_back(transports[r], CommOptions{.timeout = 5s});
  std::vector<std::string> message(p);
  std::vector<double> seconds(p);
  on_threads(p, [&](int r) {
    comms[r].barrier({}).wait(Deadline::after(20s));
    if (r == dead) {  // dies: its communicator and sockets go
      comms[r] = Communicator();
      transports[r].reset();
      return;
    }
    if (r == 0) std::this_thread::sleep_for(100ms);  // so rank 2 fails and exits while rank 0 waits on it
    std::vector<float> buf(1000, 1.0f);
    const auto t0 = Clock::now();
    try {
      comms[r].allreduce(buf, {.algorithm = Algorithm::ring}).wait(Deadline::after(20s));
      message[r] = "completed";
    } catch (const Error& e) {
      message[r] = e.what();
    }
    seconds[r] = seconds_since(t0);
    comms[r] = Communicator();  // exits, as the process would
    transports[r].reset();
  });
  std::printf("example: %s\n", message[0].c_str());
  for (int r : {0, 2}) {
    SCOPED_TRACE(fmt::format("rank {}: {}", r, message[r]));
    EXPECT_NE(message[r].find(fmt::format("rank {} allreduce #2", r)), std::string::npos);
    EXPECT_TRUE(std::regex_search(message[r], std::regex("ranks? ([0-9]+, )*1(, [0-9]+)* did not answer")));
    EXPECT_LT(seconds[r], 2.5);  // half the timeout
  }
}

}  // namespace
}  // namespace braid::comm::testing
