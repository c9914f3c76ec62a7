// The simulator at a thousand ranks on one host whose messages charge its
// cores (engine_play.cc). Rates are settled once per instant, so a ring
// step's P messages starting at once cost P rate updates, not P per message;
// and a charged message inside a host runs on the host's flow clock, so
// when the ranks are out of step a change of the host's rate is one event,
// not P. Before, either case made an all-reduce cubic in P: 512 ranks out of
// step took 230 s, and `braid sim --world 1024` minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "braid/sim/collectives.h"
#include "braid/sim/engine.h"

namespace braid::sim {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A ring all-reduce of 1 MiB over `ranks` ranks on one host of 2 cores whose
// messages cost CPU at each end (as the measured shm transport does).
struct Played {
  SimResult result;
  double wall = 0;  // seconds run() took
};
// `skew`: rank r first computes 1 ms x (1 + a fraction up to skew), so the
// ring's steps start out of step.
Played ring_on_one_host(int ranks, double skew = 0) {
  Cluster c;
  c.ranks = c.ranks_per_host = ranks;
  c.cores_per_host = 2;
  c.intra = {.alpha = 1e-6, .beta = 1 / 8e9, .gamma = 1 / 8e9};
  c.intra_cpu = {.per_message = 0.5e-6, .per_byte = 0.1e-9};
  Simulator sim(c);
  CollectiveArgs args;
  args.group.resize(static_cast<size_t>(ranks));
  std::iota(args.group.begin(), args.group.end(), 0);
  for (int r = 0; skew > 0 && r < ranks; ++r) {
    const double fraction = static_cast<double>((r * 7919) % 101) / 101;
    args.ready.push_back(sim.compute(r, 1e-3 * (1 + skew * fraction), {}, {"forward", "forward"}));
  }
  args.bytes = 1 << 20;
  allreduce(sim, args, comm::Algorithm::ring);
  const auto t0 = std::chrono::steady_clock::now();
  Played p{.result = sim.run()};
  p.wall = seconds_since(t0);
  return p;
}

TEST(SimEngineScale, ARingOfAThousandRanksOnOneHostPlaysInSeconds) {
  const Played p = ring_on_one_host(1024);
  // Measured on 2 shared cores: 0.6 s (256 ranks took 4.3 s before, cubic in P).
  EXPECT_LT(p.wall, 20.0) << p.result.tasks << " tasks";
  // Every rank is alike: all finish together, after 2 (P - 1) steps' latencies.
  ASSERT_EQ(p.result.ranks.size(), 1024u);
  for (const RankBreakdown& b : p.result.ranks) EXPECT_NEAR(b.end, p.result.makespan, 1e-9 * p.result.makespan);
  EXPECT_GT(p.result.makespan, 2 * 1023 * 1e-6);
}

TEST(SimEngineScale, ARingOfAThousandRanksOutOfStepPlaysInSeconds) {
  const Played p = ring_on_one_host(1024, /*skew=*/0.1);
  // Measured on 2 shared cores: 0.9 s (256 ranks took 8 s before, 512 ranks 230 s).
  EXPECT_LT(p.wall, 20.0) << p.result.tasks << " tasks";
  // The slowest rank's forward (1.1 ms) comes before every rank's last step.
  EXPECT_GT(p.result.makespan, 1.09e-3 + 2 * 1023 * 1e-6);
}

}  // namespace
}  // namespace braid::sim
