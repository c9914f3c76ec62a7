// Each collective against its algorithm's closed form on idealised links
// (gamma 0, one rank per host or all on one host, nothing else running), and
// every algorithm for p = 1..9 against the one thing any correct version
// must do: no rank holds the result before every input it depends on is ready.
#include "braid/sim/collectives.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "braid/base/error.h"
#include "braid/comm/cost_model.h"

namespace braid::sim {
namespace {

using comm::Algorithm;

constexpr double kAlpha = 20e-6, kBeta = 1 / 2e9;
const double kSizes[] = {0, 1000, 3 * 1048576.0 + 7};

// p ranks, one per host (`per_host` 1) or all on one host (`per_host` p).
Cluster idealised(int p, int per_host, double gamma = 0) {
  Cluster c;
  c.ranks = p;
  c.ranks_per_host = per_host;
  c.cores_per_host = 1000;
  c.intra = c.inter = {.alpha = kAlpha, .beta = kBeta, .gamma = gamma};
  return c;
}

CollectiveArgs over(int p, double bytes) {
  CollectiveArgs a;
  for (int r = 0; r < p; ++r) a.group.push_back(r);
  a.bytes = bytes;
  return a;
}

// The last of `out` to end.
double finish(Simulator& sim, const std::vector<TaskId>& out) {
  sim.run();
  double end = 0;
  for (TaskId t : out) end = std::max(end, sim.times(t).end);
  return end;
}

void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * want) << what;
}

double log2_ceil(int p) { return std::ceil(std::log2(p)); }

TEST(SimCollectives, RingAllreduce) {
  for (int p = 1; p <= 9; ++p) {
    for (int per_host : {1, p}) {
      for (double n : kSizes) {
        Simulator sim(idealised(p, per_host));
        const std::vector<TaskId> out = allreduce(sim, over(p, n), Algorithm::ring);
        sim.run();
        for (TaskId t : out) {
          expect_close(sim.times(t).end, 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta,
                       fmt::format("p {} per host {} n {}", p, per_host, n));
        }
      }
    }
  }
}

TEST(SimCollectives, RingReduceScatterAndAllgatherAreHalfOfIt) {
  for (int p = 1; p <= 9; ++p) {
    for (double n : kSizes) {
      Simulator a(idealised(p, 1)), b(idealised(p, 1));
      const double want = (p - 1) * kAlpha + (p - 1.0) / p * n * kBeta;
      expect_close(finish(a, reduce_scatter(a, over(p, n))), want, fmt::format("reduce-scatter p {} n {}", p, n));
      expect_close(finish(b, allgather(b, over(p, n))), want, fmt::format("allgather p {} n {}", p, n));
    }
  }
}

TEST(SimCollectives, RingPaysGammaOncePerReducedByte) {
  const double gamma = 1 / 8e9, n = 1e6;
  for (int p = 2; p <= 9; ++p) {
    Simulator sim(idealised(p, p, gamma));
    expect_close(finish(sim, allreduce(sim, over(p, n), Algorithm::ring)),
                 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta + (p - 1.0) / p * n * gamma,
                 fmt::format("p {}", p));
    CollectiveArgs sizes_only = over(p, n);
    sizes_only.reduce = false;
    Simulator free(idealised(p, p, gamma));
    expect_close(finish(free, allreduce(free, sizes_only, Algorithm::ring)),
                 2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta, fmt::format("p {} sizes only", p));
  }
}

TEST(SimCollectives, RecursiveDoublingAndHalvingDoubling) {
  for (int p : {1, 2, 4, 8}) {
    for (double n : kSizes) {
      const double lg = std::log2(p);
      Simulator rd(idealised(p, 1)), hd(idealised(p, 1)), bb(idealised(p, 1));
      const std::string what = fmt::format("p {} n {}", p, n);
      expect_close(finish(rd, allreduce(rd, over(p, n), Algorithm::recursive_doubling)),
                   lg * (kAlpha + n * kBeta), what);
      const double rabenseifner = 2 * lg * kAlpha + 2.0 * (p - 1) / p * n * kBeta;
      expect_close(finish(hd, allreduce(hd, over(p, n), Algorithm::halving_doubling)), rabenseifner, what);
      // One block: binary blocks is halving-doubling.
      expect_close(finish(bb, allreduce(bb, over(p, n), Algorithm::binary_blocks)), rabenseifner, what);
    }
  }
}

// p = 3: rank 0 folds into rank 1 while rank 2, already in the core phase,
// sends to rank 1 too: the two share rank 1's link (T = n beta each):
//   fold in and 2 -> 1    alpha .. alpha + 2T
//   1 -> 2                2 alpha + 2T .. 2 alpha + 3T
//   fold out 1 -> 0       .. 3 alpha + 4T
TEST(SimCollectives, EagerSendersShareTheReceiversLink) {
  const double n = 1e6, T = n * kBeta;
  Simulator sim(idealised(3, 1));
  const std::vector<TaskId> out = allreduce(sim, over(3, n), Algorithm::recursive_doubling);
  sim.run();
  expect_close(sim.times(out[0]).end, 3 * kAlpha + 4 * T, "rank 0");
  expect_close(sim.times(out[1]).end, 3 * kAlpha + 4 * T, "rank 1");
  expect_close(sim.times(out[2]).end, 2 * kAlpha + 3 * T, "rank 2");
}

TEST(SimCollectives, BinomialTreesTakeCeilLog2PRounds) {
  for (int p = 1; p <= 9; ++p) {
    for (double n : kSizes) {
      for (int root : {0, p / 2, p - 1}) {
        const std::string what = fmt::format("p {} n {} root {}", p, n, root);
        Simulator b(idealised(p, 1));
        expect_close(finish(b, broadcast(b, over(p, n), root)), log2_ceil(p) * (kAlpha + n * kBeta), what);
        // Reduce: for powers of two no two children reach a parent at once.
        if ((p & (p - 1)) != 0) continue;
        Simulator r(idealised(p, 1));
        expect_close(finish(r, reduce(r, over(p, n), root)), log2_ceil(p) * (kAlpha + n * kBeta), what);
      }
    }
  }
}

TEST(SimCollectives, BinaryTreeDepth) {
  // Empty vectors: latency only, 2 floor(log2 p) alpha (up, then down).
  for (int p = 2; p <= 9; ++p) {
    Simulator sim(idealised(p, 1));
    expect_close(finish(sim, allreduce(sim, over(p, 0), Algorithm::binary_tree)),
                 2 * std::floor(std::log2(p)) * kAlpha, fmt::format("p {}", p));
  }
  // Complete trees of depth d, k chunks of c bytes: 2 (d + k - 1) (alpha + 2 c beta),
  // a parent's port carrying both children's chunks.
  const double c = 256.0 * 1024;
  for (int d : {1, 2, 3}) {
    for (int k : {1, 4}) {
      const int p = (1 << (d + 1)) - 1;
      Simulator sim(idealised(p, 1));
      expect_close(finish(sim, allreduce(sim, over(p, k * c), Algorithm::binary_tree)),
                   2 * (d + k - 1) * (kAlpha + 2 * c * kBeta), fmt::format("depth {} chunks {}", d, k));
    }
  }
}

TEST(SimCollectives, DirectIsTheRootsLinkBothWays) {
  for (int p = 2; p <= 9; ++p) {
    for (double n : kSizes) {
      Simulator sim(idealised(p, 1));
      expect_close(finish(sim, allreduce(sim, over(p, n), Algorithm::direct)), 2 * kAlpha + 2 * (p - 1) * n * kBeta,
                   fmt::format("p {} n {}", p, n));
    }
  }
}

TEST(SimCollectives, PairwiseAlltoall) {
  for (int p = 1; p <= 9; ++p) {
    for (double n : kSizes) {
      Simulator sim(idealised(p, 1));
      expect_close(finish(sim, alltoall(sim, over(p, n))), (p - 1) * (kAlpha + n / p * kBeta),
                   fmt::format("p {} n {}", p, n));
    }
  }
}

TEST(SimCollectives, SharedMemoryCopiesInAndOut) {
  const double gamma = 1 / 8e9;
  for (int p = 1; p <= 9; ++p) {
    for (double n : kSizes) {
      Simulator sim(idealised(p, p, gamma));
      expect_close(finish(sim, allreduce(sim, over(p, n), Algorithm::shared_memory)),
                   2 * (kAlpha + n * kBeta) + (p - 1.0) / p * n * gamma, fmt::format("p {} n {}", p, n));
    }
  }
  Simulator two_hosts(idealised(4, 2));
  EXPECT_THROW(allreduce(two_hosts, over(4, 1), Algorithm::shared_memory), ValueError);
}

TEST(SimCollectives, HierarchicalOnTwoHostsOfFour) {
  // Binomial reduce inside each host (2 rounds), the leaders' all-reduce
  // between the hosts, a binomial broadcast inside each host (2 rounds).
  Cluster c = idealised(8, 4);
  c.intra = {.alpha = 3e-6, .beta = 1 / 8e9, .gamma = 0};
  for (double n : kSizes) {
    const Algorithm between = comm::choose_allreduce(2, static_cast<size_t>(n), c.intra, c.inter, 2);
    Simulator pair(idealised(2, 1));
    const double leaders = finish(pair, allreduce(pair, over(2, n), between));
    Simulator sim(c);
    const std::vector<TaskId> out = allreduce(sim, over(8, n), Algorithm::hierarchical);
    expect_close(finish(sim, out), 4 * (c.intra.alpha + n * c.intra.beta) + leaders, fmt::format("n {}", n));
  }
  // One rank per host: a flat ring.
  Simulator flat(idealised(4, 1)), ring(idealised(4, 1));
  EXPECT_EQ(finish(flat, allreduce(flat, over(4, 1e6), Algorithm::hierarchical)),
            finish(ring, allreduce(ring, over(4, 1e6), Algorithm::ring)));
}

// Rank `late`'s input is ready at 1 s; everyone else's at once. Every output
// that depends on it must not be ready before.
TEST(SimCollectives, EveryAlgorithmWaitsForEveryInput) {
  std::vector<std::pair<std::string, std::function<std::vector<TaskId>(Simulator&, const CollectiveArgs&)>>> ops;
  for (Algorithm a : comm::kAllreduceAlgorithms) {
    ops.emplace_back(std::string(comm::name(a)), [a](Simulator& s, const CollectiveArgs& x) { return allreduce(s, x, a); });
  }
  ops.emplace_back("automatic", [](Simulator& s, const CollectiveArgs& x) { return allreduce(s, x); });
  ops.emplace_back("reduce_scatter", [](Simulator& s, const CollectiveArgs& x) { return reduce_scatter(s, x); });
  ops.emplace_back("allgather", [](Simulator& s, const CollectiveArgs& x) { return allgather(s, x); });
  ops.emplace_back("alltoall", [](Simulator& s, const CollectiveArgs& x) { return alltoall(s, x); });
  for (const auto& [name, op] : ops) {
    for (int p = 1; p <= 9; ++p) {
      // Two hosts where p allows it, so hierarchical is not just a ring.
      const int per_host = name == "shared_memory" ? p : std::max(1, (p + 1) / 2);
      for (int late = 0; late < p; ++late) {
        Simulator sim(idealised(p, per_host, 1 / 8e9));
        CollectiveArgs a = over(p, 3e6 + 1);
        for (int r = 0; r < p; ++r) a.ready.push_back(sim.compute(r, r == late ? 1.0 : 0.0, {}, {"backward", "b"}));
        const std::vector<TaskId> out = op(sim, a);
        ASSERT_EQ(out.size(), static_cast<size_t>(p));
        sim.run();
        for (int r = 0; r < p; ++r) {
          EXPECT_GE(sim.times(out[r]).end, 1.0) << name << " p " << p << " late " << late << " rank " << r;
        }
      }
    }
  }
}

TEST(SimCollectives, BroadcastAndReduceWaitOnTheirRoot) {
  for (int p = 1; p <= 9; ++p) {
    for (int root = 0; root < p; ++root) {
      Simulator sim(idealised(p, 1));
      CollectiveArgs a = over(p, 1e6);
      for (int r = 0; r < p; ++r) a.ready.push_back(sim.compute(r, r == root ? 1.0 : 0.0, {}, {"forward", "f"}));
      const std::vector<TaskId> b = broadcast(sim, a, root), red = reduce(sim, a, root);
      sim.run();
      for (int r = 0; r < p; ++r) EXPECT_GE(sim.times(b[r]).end, 1.0) << "p " << p << " root " << root;
      EXPECT_GE(sim.times(red[root]).end, 1.0);
    }
  }
}

TEST(SimCollectives, ChoosesAsTheCommunicatorWould) {
  const Cluster c = idealised(8, 4);
  for (double n : {64.0, 1e6, 1e8}) {
    EXPECT_EQ(choose_allreduce(c, {0, 1, 2, 3}, n),
              comm::choose_allreduce(4, static_cast<size_t>(n), c.intra, c.inter, 1));
    EXPECT_EQ(choose_allreduce(c, {0, 1, 4, 5, 6}, n),
              comm::choose_allreduce(5, static_cast<size_t>(n), c.intra, c.inter, 2));
  }
}

TEST(SimCollectives, BadArgumentsAreValueErrors) {
  Simulator sim(idealised(4, 2));
  CollectiveArgs a = over(4, 10);
  EXPECT_THROW(allreduce(sim, CollectiveArgs{}), ValueError);
  a.group = {0, 1, 4};
  EXPECT_THROW(allreduce(sim, a), ValueError);
  a.group = {0, 1, 1};
  EXPECT_THROW(allreduce(sim, a), ValueError);
  a = over(4, -1);
  EXPECT_THROW(allreduce(sim, a), ValueError);
  a = over(4, 10);
  a.ready = {sim.join({})};
  EXPECT_THROW(allreduce(sim, a), ValueError);
  EXPECT_THROW(broadcast(sim, over(4, 10), 4), ValueError);
  EXPECT_THROW(reduce(sim, over(4, 10), -1), ValueError);
}

// 1024 ranks, 8 per host, a 100 MB ring all-reduce with reductions: 2 * 1023
// steps of 1024 messages, about 3M tasks.
TEST(SimCollectives, ThousandRankRingCompletes) {
  Cluster c;
  c.ranks = 1024;
  c.ranks_per_host = 8;
  Simulator sim(c);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TaskId> out = allreduce(sim, over(1024, 100e6), Algorithm::ring);
  const auto t1 = std::chrono::steady_clock::now();
  const SimResult r = sim.run();
  const auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("1024-rank ring: %lld tasks, %lld events; building %.0f ms, running %.0f ms\n",
              static_cast<long long>(r.tasks), static_cast<long long>(r.events), ms(t1 - t0), ms(t2 - t1));
  EXPECT_GE(r.tasks, 2 * 1023 * 1024);
  for (TaskId t : out) EXPECT_GT(sim.times(t).end, 0);
  // Each step sends one message from host to host over every interface, in
  // order on its channel, so the interfaces set the pace: the ring's closed
  // form on them (the in-host steps and reductions hide behind it).
  const double between = 2 * 1023 * c.inter.alpha + 2.0 * 1023 / 1024 * 100e6 * c.inter.beta;
  EXPECT_GE(r.makespan, between * (1 - 1e-9));
  EXPECT_LE(r.makespan, between * 1.01);
}

}  // namespace
}  // namespace braid::sim
