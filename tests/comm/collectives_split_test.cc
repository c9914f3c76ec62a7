// split(): sub-communicators on the parent's transport, their own sequence
// numbers and tag space; hierarchical all-reduce over fake hosts; calibrate.
#include <gtest/gtest.h>

#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

TEST(Split, ByParityWithReversedKeys) {
  for (int p : {1, 2, 5, 6, 9}) {
    run_world(p, [&](int r, Communicator& comm) {
      Communicator half = comm.split(r % 2, -r);
      const int n_same = (p - r % 2 + 1) / 2;
      ASSERT_EQ(half.size(), n_same);
      // Keys -r: the highest parent rank becomes rank 0.
      EXPECT_EQ(half.transport_rank(0), (p - 1) - ((p - 1 - r % 2) % 2));
      EXPECT_EQ(half.transport_rank(half.rank()), r);
      // Collectives on parent and child interleave without mixing messages.
      std::vector<int64_t> a{r}, b{r};
      Work wa = half.allreduce(a);
      Work wb = comm.allreduce(b);
      wa.wait(Deadline::after(30s));
      wb.wait(Deadline::after(30s));
      int64_t same = 0, all = 0;
      for (int q = 0; q < p; ++q) (q % 2 == r % 2 ? same : all) += q;
      EXPECT_EQ(a[0], same);
      EXPECT_EQ(b[0], same + all);
    });
  }
}

TEST(Split, NegativeColorGetsNoGroupAndNestedSplitsWork) {
  run_world(8, [&](int r, Communicator& comm) {
    Communicator some = comm.split(r < 6 ? 0 : -1, r);
    if (r >= 6) {
      EXPECT_FALSE(some.valid());
      EXPECT_THROW(some.rank(), ValueError);
      return;
    }
    ASSERT_EQ(some.size(), 6);
    Communicator pair = some.split(some.rank() / 2, 0);
    ASSERT_EQ(pair.size(), 2);
    std::vector<float> x{static_cast<float>(r)};
    pair.allreduce(x, {.op = Op::max}).wait(Deadline::after(30s));
    EXPECT_EQ(x[0], static_cast<float>(r | 1));
    pair.barrier().wait(Deadline::after(30s));
  });
}

TEST(Hierarchical, MatchesFlatAcrossFakeHosts) {
  for (int p : {4, 6, 7, 9}) {
    // Three ranks per host, the last host partly filled.
    run_world(p, [&](int r, Communicator& comm) {
      for (Op op : kOps) {
        std::vector<double> x(1001);
        for (size_t i = 0; i < x.size(); ++i) x[i] = input_value(op, r, i);
        comm.allreduce(x, {.op = op, .algorithm = Algorithm::hierarchical}).wait(Deadline::after(30s));
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], reference<double>(op, p, i), 1e-12);
      }
    }, [](int r) { return CommOptions{.host = fmt::format("host{}", r / 3)}; });
  }
}

TEST(Hierarchical, ChosenAutomaticallyWhenHostsAreFarApart) {
  const LinkCost fast{.alpha = 2e-6, .beta = 1.0 / 20e9, .gamma = 1.0 / 8e9};
  const LinkCost slow{.alpha = 50e-6, .beta = 1.0 / 0.125e9, .gamma = 1.0 / 8e9};
  std::vector<Algorithm> picks(8);
  run_world(8, [&](int r, Communicator& comm) {
    EXPECT_NE(comm.choose_allreduce(64 << 20), Algorithm::hierarchical) << "hosts are unknown before the first collective";
    std::vector<float> x(50000, static_cast<float>(r));
    comm.allreduce(x).wait(Deadline::after(30s));  // discovers the hosts (and splits) inside the collective
    for (float v : x) ASSERT_EQ(v, 28.0f);
    picks[r] = comm.choose_allreduce(64 << 20);
  }, [&](int r) { return CommOptions{.host = r < 4 ? "east" : "west", .cost = fast, .inter_host_cost = slow}; });
  for (Algorithm a : picks) EXPECT_EQ(a, Algorithm::hierarchical);
}

TEST(Calibrate, EveryRankAgreesOnMeasuredCosts) {
  std::vector<LinkCost> costs(4);
  std::vector<Algorithm> picks(4);
  run_world(4, [&](int r, Communicator& comm) {
    comm.calibrate().wait(Deadline::after(30s));
    costs[r] = comm.link_cost();
    picks[r] = comm.choose_allreduce(64 << 20);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_GT(costs[r].alpha, 0);
    EXPECT_LT(costs[r].alpha, 0.05);  // s; inproc hand-off is microseconds
    EXPECT_GT(costs[r].beta, 0);
    EXPECT_GT(costs[r].gamma, 0);
    EXPECT_EQ(costs[r].alpha, costs[0].alpha);
    EXPECT_EQ(costs[r].beta, costs[0].beta);
    EXPECT_EQ(picks[r], picks[0]);
  }
}

}  // namespace
}  // namespace braid::comm::testing
