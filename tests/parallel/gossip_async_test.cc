// Asynchronous gossip (gossip.mode = async, parallel/gossip/latest_exchange.h)
// on in-process ranks: when every neighbour's message is in, a step is the
// synchronous mixing X <- W X; a slow replica slows none of the others, its
// weights are mixed only while its step is within max_staleness, and finish
// still ends every replica at the exact average.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "braid/parallel/gossip/gossip.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_replica.h"
#include "tests/testing/error_message.h"

namespace braid::parallel::gossip {
namespace {

using parallel::testing::on_ranks;
using Replica = parallel::testing::ToyReplica;
using namespace std::chrono_literals;

TEST(AsyncGossip, WithEveryMessageInAStepIsTheSynchronousMixing) {
  for (Topology topology : {Topology::ring, Topology::exponential}) {
    const int world = 5;
    const MixingGraph graph(topology, world);
    const std::vector<double> w = graph.matrix();
    std::vector<std::vector<double>> start(world), after(world);
    std::barrier sent(world);
    on_ranks(world, [&](int rank, comm::Communicator comm) {
      Replica m(7);
      Gossip g(comm, {.topology = topology, .async = true});
      g.setup(m.params, {}, {});
      m.set(Replica(50 + static_cast<uint64_t>(rank)).values());
      start[static_cast<size_t>(rank)] = m.values();
      g.before_forward();
      sent.arrive_and_wait();  // every message is in (in-process sends complete on matching)
      g.after_step();
      after[static_cast<size_t>(rank)] = m.values();
      EXPECT_EQ(g.stats()["mixed_per_step"].get<double>(), static_cast<double>(graph.in_neighbours(rank).size()));
      g.finish();
    });
    for (int i = 0; i < world; ++i) {
      for (size_t e = 0; e < start[0].size(); ++e) {
        double want = 0;
        for (int j = 0; j < world; ++j) want += w[static_cast<size_t>(i * world + j)] * start[static_cast<size_t>(j)][e];
        ASSERT_NEAR(after[static_cast<size_t>(i)][e], want, 1e-12) << topology_name(topology) << " rank " << i;
      }
    }
  }
}

// Data rank 1 takes 60 ms a step, the others 10 ms: they finish their steps
// long before it does, mix its weights only while it is within
// max_staleness steps, and all end at the exact average.
TEST(AsyncGossip, ASlowReplicaSlowsNoOneAndFinishAveragesExactly) {
  const int world = 4;
  const int64_t steps = 20;
  std::vector<double> loop_s(world);
  std::vector<nlohmann::json> stats(world);
  std::vector<std::vector<double>> before_finish(world), final_values(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    Gossip g(comm, {.topology = Topology::ring, .async = true, .max_staleness = 2, .timeout = 20s});
    g.setup(m.params, {}, {});
    const auto start = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      g.before_forward();
      m.backward_rows(s, rank, world);
      m.sgd(parallel::testing::kLr);
      std::this_thread::sleep_for(rank == 1 ? 60ms : 10ms);
      g.after_step();
    }
    loop_s[static_cast<size_t>(rank)] = seconds_since(start);
    before_finish[static_cast<size_t>(rank)] = m.values();
    g.finish();
    final_values[static_cast<size_t>(rank)] = m.values();
    stats[static_cast<size_t>(rank)] = g.stats();
  });
  EXPECT_GT(loop_s[1], 1.0);
  for (int r : {0, 2, 3}) EXPECT_LT(loop_s[static_cast<size_t>(r)], 0.6) << "rank " << r << " waited for rank 1";
  for (int r : {0, 2}) {  // rank 1's neighbours: its weights were soon too old
    EXPECT_GT(stats[static_cast<size_t>(r)]["too_old"].get<int64_t>(), 0) << stats[static_cast<size_t>(r)].dump();
  }
  std::vector<double> mean(before_finish[0].size(), 0.0);
  for (const auto& x : before_finish) {
    for (size_t e = 0; e < mean.size(); ++e) mean[e] += x[e] / world;
  }
  for (int r = 0; r < world; ++r) {
    for (size_t e = 0; e < mean.size(); ++e) ASSERT_NEAR(final_values[static_cast<size_t>(r)][e], mean[e], 1e-12);
  }
}

TEST(AsyncGossip, AFinishThatWaitsTooLongNamesRankOperationAndNeighbour) {
  std::string msg;
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    Gossip g(comm, {.topology = Topology::ring, .async = true, .timeout = 200ms});
    g.setup(m.params, {}, {});
    g.before_forward();
    g.after_step();
    if (rank == 1) {  // alive, but never finishes
      std::this_thread::sleep_for(1500ms);
      return;
    }
    msg = test::message_of<TimeoutError>([&] { g.finish(); });
  });
  for (const char* part : {"rank 0 of 2 on the data axis", "asynchronous gossip's receive of rank 1's weights", "waited"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  }
}

}  // namespace
}  // namespace braid::parallel::gossip
