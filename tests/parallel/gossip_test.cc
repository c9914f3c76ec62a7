// D-PSGD (parallel/gossip/gossip.h) on in-process ranks against references
// computed here: the dense recurrence X(k+1) = W X(k) - lr G(k) run in one
// thread; with mixing alone the replicas' average stays put and their
// distance from it shrinks by at most |lambda_2| per step, and by about that
// once the slowest direction dominates.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "braid/parallel/gossip/gossip.h"
#include "braid/parallel/plan_factory.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_replica.h"
#include "tests/testing/error_message.h"

namespace braid::parallel::gossip {
namespace {

using parallel::testing::kLr;
using parallel::testing::mse;
using parallel::testing::on_ranks;
using parallel::testing::ToyNet;
using Replica = parallel::testing::ToyReplica;
using Matrix = std::vector<std::vector<double>>;  // [replica][entry]

std::vector<double> mean_of(const Matrix& x) {
  std::vector<double> m(x[0].size(), 0.0);
  for (const auto& row : x) {
    for (size_t e = 0; e < m.size(); ++e) m[e] += row[e] / static_cast<double>(x.size());
  }
  return m;
}

double distance2(const Matrix& x) {  // mean_i ||x_i - x-bar||^2
  const std::vector<double> m = mean_of(x);
  double d = 0;
  for (const auto& row : x) {
    for (size_t e = 0; e < m.size(); ++e) d += (row[e] - m[e]) * (row[e] - m[e]);
  }
  return d / static_cast<double>(x.size());
}

struct Case {
  Topology topology;
  int world;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("{}{}", topology_name(info.param.topology), info.param.world);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Topology t : {Topology::ring, Topology::torus, Topology::exponential}) {
    for (int p = 1; p <= 9; ++p) out.push_back({t, p});
  }
  return out;
}

class Dpsgd : public ::testing::TestWithParam<Case> {};

// Every rank's replica after every step against X(k+1) = W X(k) - lr G(k),
// G(k) the gradients at X(k) on each replica's rows, from equal starts.
TEST_P(Dpsgd, EqualsTheDenseRecurrenceAndMovesTheAverageByTheMeanUpdate) {
  const auto [topology, world] = GetParam();
  const int64_t steps = 5;
  const MixingGraph graph(topology, world);
  const std::vector<double> w = graph.matrix();
  // Reference, one thread.
  std::vector<Matrix> ref(static_cast<size_t>(steps + 1));
  {
    std::vector<std::unique_ptr<Replica>> reps;
    for (int r = 0; r < world; ++r) reps.push_back(std::make_unique<Replica>(7));
    for (const auto& m : reps) ref[0].push_back(m->values());
    for (int64_t s = 0; s < steps; ++s) {
      const Matrix& x = ref[static_cast<size_t>(s)];
      Matrix next(x.size(), std::vector<double>(x[0].size(), 0.0));
      for (int i = 0; i < world; ++i) {
        const std::vector<double> g = reps[static_cast<size_t>(i)]->backward_rows(s, i, world);
        for (size_t e = 0; e < g.size(); ++e) {
          double v = -kLr * g[e];
          for (int j = 0; j < world; ++j) v += w[static_cast<size_t>(i * world + j)] * x[static_cast<size_t>(j)][e];
          next[static_cast<size_t>(i)][e] = v;
        }
      }
      for (int i = 0; i < world; ++i) reps[static_cast<size_t>(i)]->set(next[static_cast<size_t>(i)]);
      ref[static_cast<size_t>(s + 1)] = next;
    }
  }
  std::vector<Matrix> got(static_cast<size_t>(steps + 1), Matrix(static_cast<size_t>(world)));
  std::vector<Matrix> grads(static_cast<size_t>(steps), Matrix(static_cast<size_t>(world)));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(rank == 0 ? 7 : 100 + static_cast<uint64_t>(rank));  // setup() copies rank 0's
    Gossip g(comm, {.topology = topology});
    g.setup(m.params, {}, {{"lr", kLr}});
    got[0][static_cast<size_t>(rank)] = m.values();
    for (int64_t s = 0; s < steps; ++s) {
      g.before_forward();
      grads[static_cast<size_t>(s)][static_cast<size_t>(rank)] = m.backward_rows(s, rank, world);
      m.sgd(kLr);  // the local optimizer
      g.after_step();
      got[static_cast<size_t>(s + 1)][static_cast<size_t>(rank)] = m.values();
    }
    const size_t n = m.values().size();
    EXPECT_DOUBLE_EQ(g.bytes_sent(), static_cast<double>(steps * graph.shifts().size() * n * sizeof(double)));
  });
  for (int64_t s = 0; s <= steps; ++s) {
    for (int r = 0; r < world; ++r) {
      const auto& a = got[static_cast<size_t>(s)][static_cast<size_t>(r)];
      const auto& b = ref[static_cast<size_t>(s)][static_cast<size_t>(r)];
      for (size_t e = 0; e < a.size(); ++e) ASSERT_NEAR(a[e], b[e], 1e-12) << "step " << s << " rank " << r << " entry " << e;
    }
  }
  // W doubly stochastic: x-bar(k+1) = x-bar(k) - lr mean_i g_i(k).
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<double> before = mean_of(got[static_cast<size_t>(s)]);
    const std::vector<double> after = mean_of(got[static_cast<size_t>(s + 1)]);
    const std::vector<double> g = mean_of(grads[static_cast<size_t>(s)]);
    for (size_t e = 0; e < g.size(); ++e) ASSERT_NEAR(after[e], before[e] - kLr * g[e], 1e-12) << "step " << s;
  }
}

// No gradient (lr 0), replicas set apart after setup: the average is
// preserved and ||X - X-bar|| shrinks by <= |lambda_2| each step, by about
// |lambda_2| once the slowest direction dominates.
TEST_P(Dpsgd, MixingAlonePreservesTheAverageAndContractsByLambda2) {
  const auto [topology, world] = GetParam();
  const int64_t steps = 40;
  const double lambda2 = MixingGraph(topology, world).second_eigenvalue();
  std::vector<Matrix> seen(static_cast<size_t>(steps + 1), Matrix(static_cast<size_t>(world)));
  std::vector<double> measured(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    Gossip g(comm, {.topology = topology});
    g.setup(m.params, {}, {});
    m.set(Replica(50 + static_cast<uint64_t>(rank)).values());
    seen[0][static_cast<size_t>(rank)] = m.values();
    for (int64_t s = 0; s < steps; ++s) {
      g.before_forward();
      g.after_step();
      seen[static_cast<size_t>(s + 1)][static_cast<size_t>(rank)] = m.values();
    }
    measured[static_cast<size_t>(rank)] = g.consensus_distance();
  });
  const std::vector<double> mean0 = mean_of(seen[0]);
  for (int64_t s = 1; s <= steps; ++s) {
    const std::vector<double> mean = mean_of(seen[static_cast<size_t>(s)]);
    for (size_t e = 0; e < mean.size(); ++e) ASSERT_NEAR(mean[e], mean0[e], 1e-12) << "step " << s;
  }
  const double d0 = std::sqrt(distance2(seen[0]));
  if (world == 1) {
    EXPECT_EQ(d0, 0.0);
    return;
  }
  ASSERT_GT(d0, 0.1);
  double last_ratio = -1;
  for (int64_t s = 1; s <= steps; ++s) {
    const double before = std::sqrt(distance2(seen[static_cast<size_t>(s - 1)]));
    const double now = std::sqrt(distance2(seen[static_cast<size_t>(s)]));
    if (before < 1e-9 * d0) break;  // down to rounding
    ASSERT_LE(now, lambda2 * before + 1e-12 * d0) << "step " << s;
    last_ratio = now / before;
  }
  if (lambda2 > 1e-6) {
    EXPECT_NEAR(last_ratio, lambda2, 0.02 * lambda2) << "asymptotic contraction per step";
  } else {  // exact averaging in one step (a complete graph)
    EXPECT_LT(std::sqrt(distance2(seen[1])), 1e-12 * d0);
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_NEAR(measured[static_cast<size_t>(r)], distance2(seen.back()), 1e-9 * distance2(seen[0]) + 1e-30);
  }
}

INSTANTIATE_TEST_SUITE_P(Topologies, Dpsgd, ::testing::ValuesIn(cases()), case_name);

TEST(Gossip, CheckpointAndFinishHoldTheExactAverage) {
  const int world = 4;
  for (bool final_average : {true, false}) {
    on_ranks(world, [&](int rank, comm::Communicator comm) {
      Replica m(7);
      Gossip g(comm, {.topology = Topology::ring, .final_average = final_average});
      g.setup(m.params, {}, {});
      for (int64_t s = 0; s < 3; ++s) {
        g.before_forward();
        m.backward_rows(s, rank, world);
        m.sgd(kLr);
        g.after_step();
      }
      const std::vector<double> live = m.values();
      std::vector<double> mean = live;
      comm.allreduce(mean, {.op = comm::Op::avg}).wait(Deadline::after(std::chrono::seconds(20)));
      const nn::NamedTensors state = g.model_state(m.net);
      EXPECT_EQ(m.values(), live) << "checkpointing must leave the replicas as they are";
      std::vector<double> saved;
      for (const auto& [name, t] : state) {
        const std::vector<double> part = t.to_vector<double>();
        saved.insert(saved.end(), part.begin(), part.end());
      }
      ASSERT_EQ(saved.size(), mean.size());
      for (size_t e = 0; e < mean.size(); ++e) ASSERT_NEAR(saved[e], mean[e], 1e-14);
      EXPECT_NE(live, saved) << "replicas of a ring of 4 differ after 3 steps";
      g.finish();
      if (final_average) {
        for (size_t e = 0; e < mean.size(); ++e) ASSERT_NEAR(m.values()[e], mean[e], 1e-14);
      } else {
        EXPECT_EQ(m.values(), live);
      }
      const nlohmann::json st = g.stats();
      EXPECT_GT(st["consensus_distance"].get<double>(), 0.0) << st.dump();
      EXPECT_EQ(st["consensus_step"].get<int64_t>(), 3);
      EXPECT_NE(g.report().find("ring of 4"), std::string::npos) << g.report();
    });
  }
}

// Buffers (batch-norm statistics) are not mixed; finish averages them, and
// leaves integer counters alone.
TEST(Gossip, FinishAveragesFloatBuffersAndKeepsCounters) {
  const int world = 3;
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    const Tensor stats = Tensor::zeros({4}, DType::f64), count = Tensor::zeros({1}, DType::i64);
    Gossip g(comm, {.topology = Topology::ring});
    g.setup(m.params, {{"bn.running_mean", stats}, {"bn.num_batches", count}}, {});
    stats.fill(rank), count.fill(10 + rank);  // each replica's own statistics
    g.before_forward();
    g.after_step();
    EXPECT_EQ(stats.to_vector<double>(), std::vector<double>(4, rank)) << "mixed with the parameters";
    g.finish();
    EXPECT_EQ(stats.to_vector<double>(), std::vector<double>(4, 1.0));  // (0 + 1 + 2) / 3
    EXPECT_EQ(count.to_vector<int64_t>(), std::vector<int64_t>{10 + rank});
  });
}

TEST(Gossip, AWaitThatTimesOutNamesRankOperationAndWait) {
  std::string msg;
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    Gossip g(comm, {.topology = Topology::ring, .timeout = std::chrono::milliseconds(200)});
    g.setup(m.params, {}, {});
    if (rank == 1) {  // alive but never steps
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    g.before_forward();
    msg = test::message_of<TimeoutError>([&] { g.after_step(); });
  });
  for (const char* part : {"rank 0 of 2 on the data axis", "gossip's receive of rank 1's weights", "in step 1", "waited"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  }
}

comm::Communicator one_rank() {
  return comm::Communicator(std::shared_ptr<comm::Transport>(comm::InprocWorld::create(1)->transport(0)));
}

TEST(GossipPlan, BuiltByNameAndRefusedWhereReplicasCannotMixApart) {
  auto net = std::make_shared<ToyNet>(7);
  for (const char* strategy : {"gossip", "hybrid"}) {
    PlannedModel pm = make_plan({.strategy = strategy}, one_rank(), nullptr, net, mse);
    EXPECT_NE(pm.plan->describe().find(fmt::format("aggregation {}", strategy)), std::string::npos) << pm.plan->describe();
    EXPECT_FALSE(pm.plan->owns_optimizer());
    EXPECT_EQ(pm.plan->grad_sync_name(), "");
    const std::string bn = test::message_of<ConfigError>(
        [&] { make_plan({.strategy = strategy, .sync_batch_norm = true}, one_rank(), nullptr, net, mse); });
    EXPECT_NE(bn.find("synchronised batch norm"), std::string::npos) << bn;
    const std::string tp = test::message_of<ConfigError>(
        [&] { make_plan({.strategy = strategy, .mesh = {.tensor = 2}}, one_rank(), nullptr, net, mse); });
    EXPECT_NE(tp.find("parallel.tensor must be 1"), std::string::npos) << tp;
  }
  EXPECT_THROW(make_plan({.strategy = "gossip", .gossip = {.topology = Topology::torus, .torus_rows = 2}}, one_rank(),
                         nullptr, net, mse),
               ConfigError);  // 2 rows of 1 replica
}

}  // namespace
}  // namespace braid::parallel::gossip
