// The skeleton partition (parallel/skeleton/) against references computed
// here: with fraction 1 it is model averaging after every local SGD step; with
// a smaller fraction every entry outside the skeleton moves only on its owner
// between merges, a merge takes it from its owner, and the new skeleton is the
// top fraction by |w| + |grad w|.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <thread>

#include "braid/comm/transport/inproc.h"
#include "braid/parallel/plan_factory.h"
#include "braid/parallel/skeleton/partition.h"
#include "braid/parallel/skeleton/skeleton.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_model.h"
#include "tests/testing/error_message.h"

namespace braid::parallel::skeleton {
namespace {

using parallel::testing::global_batch;
using parallel::testing::kBatch;
using parallel::testing::kLr;
using parallel::testing::mse;
using parallel::testing::on_ranks;
using parallel::testing::ToyNet;

std::vector<double> concat(const std::vector<std::vector<double>>& parts) {
  std::vector<double> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// One replica: the toy model as a module, stepped by plain SGD on its rows of
// the global batch; the step's gradient stays in .grad (the partition reads it).
struct Replica {
  ToyNet net;
  std::vector<NamedParameter> params;
  explicit Replica(uint64_t seed) : net(seed) {
    for (auto& [name, t] : net.named_parameters()) params.push_back({name, t});
  }
  void sgd_step(int64_t step, int rank, int world) {
    for (auto& p : params) {
      if (p.tensor.grad().defined()) p.tensor.grad().fill(0);
    }
    auto [x, t] = global_batch<double>(step, world * kBatch);
    backward(mse(net.forward(slice(x, 0, rank * kBatch, (rank + 1) * kBatch)),
                 slice(t, 0, rank * kBatch, (rank + 1) * kBatch)));
    autograd::NoGradGuard no_grad;
    for (auto& p : params) {
      double* w = p.tensor.data<double>();
      const std::vector<double> g = p.tensor.grad().to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) w[i] -= kLr * g[i];
    }
  }
  std::vector<double> values() const {
    std::vector<std::vector<double>> v;
    for (const auto& p : params) v.push_back(p.tensor.to_vector<double>());
    return concat(v);
  }
  std::vector<double> grads() const {
    std::vector<std::vector<double>> v;
    for (const auto& p : params) v.push_back(p.tensor.grad().to_vector<double>());
    return concat(v);
  }
};

// The skeleton an independent full sort picks: importance descending, index ascending.
std::vector<uint8_t> top_by_sort(const std::vector<double>& importance, int64_t k) {
  std::vector<int64_t> order(importance.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double ia = importance[static_cast<size_t>(a)], ib = importance[static_cast<size_t>(b)];
    return ia != ib ? ia > ib : a < b;
  });
  std::vector<uint8_t> mask(importance.size(), 0);
  for (int64_t j = 0; j < k; ++j) mask[static_cast<size_t>(order[static_cast<size_t>(j)])] = 1;
  return mask;
}

TEST(SkeletonSelection, SizeRoundsAndClamps) {
  EXPECT_EQ(skeleton_size(66, 0.25), 17);  // 16.5 rounds up
  EXPECT_EQ(skeleton_size(10, 1.0), 10);
  EXPECT_EQ(skeleton_size(1000, 1e-6), 1);  // never empty
  EXPECT_EQ(skeleton_size(0, 0.5), 0);
  EXPECT_THROW(skeleton_size(10, 0.0), ValueError);
  EXPECT_THROW(skeleton_size(10, 1.5), ValueError);
}

TEST(SkeletonSelection, TopEntriesBreakTiesByIndexAndRankNaNLast) {
  const std::vector<double> imp{1.0, 3.0, NAN, 3.0, 2.0, 3.0, 0.5};
  EXPECT_EQ(top_entries(imp, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(top_entries(imp, 4), (std::vector<int64_t>{1, 3, 4, 5}));
  EXPECT_EQ(top_entries(imp, 7), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(top_entries(imp, 6), (std::vector<int64_t>{0, 1, 3, 4, 5, 6}));
  EXPECT_EQ(top_entries(std::vector<double>{-1.0, -3.0, 2.0, -0.5, 0.0, -0.0}, 3), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(top_entries(std::vector<double>{-1.0, -3.0, 2.0, -0.5, -0.0, 0.0}, 2), (std::vector<int64_t>{2, 4}));
  Generator g(3);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<double> random(5000);
    for (double& v : random) {
      v = trial % 2 ? std::floor(g.uniform_f64() * 50) : g.normal() * 1e3;  // many ties; both signs
    }
    for (int64_t count : {1, 137, 2500, 4999}) {
      const std::vector<int64_t> top = top_entries(random, count);
      std::vector<uint8_t> got(random.size(), 0);
      for (int64_t i : top) got[static_cast<size_t>(i)] = 1;
      ASSERT_EQ(got, top_by_sort(random, count)) << "trial " << trial << ", " << count << " entries";
      EXPECT_TRUE(std::is_sorted(top.begin(), top.end()));
    }
  }
}

TEST(SkeletonSelection, OwnersPartitionTheRestAlikeOnEveryRankAndEvenly) {
  const int64_t n = 40000;
  std::vector<uint8_t> mask(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; i += 10) mask[static_cast<size_t>(i)] = 1;
  for (int ranks : {1, 3, 4, 7}) {
    const std::vector<int32_t> owner = draw_owners(mask, ranks, 11, 2);
    EXPECT_EQ(owner, draw_owners(mask, ranks, 11, 2));  // a pure function: every rank draws the same
    std::vector<int64_t> count(static_cast<size_t>(ranks), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t r = owner[static_cast<size_t>(i)];
      if (mask[static_cast<size_t>(i)]) {
        ASSERT_EQ(r, -1) << i;
      } else {
        ASSERT_GE(r, 0) << i;
        ASSERT_LT(r, ranks) << i;
        ++count[static_cast<size_t>(r)];
      }
    }
    const double share = 0.9 * static_cast<double>(n) / ranks;
    for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c), share, 0.05 * share) << ranks << " ranks";
  }
  EXPECT_NE(draw_owners(mask, 4, 11, 2), draw_owners(mask, 4, 11, 3));  // a new draw each round
}

TEST(SkeletonSelection, MaskHexRoundTrip) {
  for (int64_t n : {0, 1, 4, 5, 13, 64}) {
    std::vector<uint8_t> mask(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) mask[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 7 + 3) % 5 < 2);
    EXPECT_EQ(mask_from_hex(mask_to_hex(mask), n), mask) << n;
  }
  EXPECT_EQ(mask_to_hex(std::vector<uint8_t>{1, 0, 0, 1, 1}), "91");
  EXPECT_THROW(mask_from_hex("9", 5), ValueError);   // too short
  EXPECT_THROW(mask_from_hex("92", 5), ValueError);  // sets entry 5
  EXPECT_THROW(mask_from_hex("9g", 5), ValueError);
}

TEST(Skeleton, RefusesFractionsOutsideTheRangeAndNoMerges) {
  auto one = comm::InprocWorld::create(1);
  comm::Communicator c(std::shared_ptr<comm::Transport>(one->transport(0)));
  EXPECT_THROW(SkeletonPartition(c, {.fraction = 0.0}), ConfigError);
  EXPECT_THROW(SkeletonPartition(c, {.fraction = 1.01}), ConfigError);
  EXPECT_THROW(SkeletonPartition(c, {.every = 0}), ConfigError);
}

class FractionOne : public ::testing::TestWithParam<int> {};

// Model averaging, computed apart from the partition: every replica takes
// its local SGD step from the same start, then every parameter is replaced by
// the plain mean over the replicas.
TEST_P(FractionOne, EqualsModelAveragingEveryStep) {
  const int world = GetParam();
  const int64_t steps = 7;
  std::vector<std::unique_ptr<Replica>> ref;
  for (int r = 0; r < world; ++r) ref.push_back(std::make_unique<Replica>(7));
  for (int64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) ref[static_cast<size_t>(r)]->sgd_step(s, r, world);
    const size_t n = ref[0]->values().size();
    std::vector<double> mean(n, 0.0);
    for (const auto& m : ref) {
      const std::vector<double> v = m->values();
      for (size_t i = 0; i < n; ++i) mean[i] += v[i];
    }
    for (double& v : mean) v /= world;
    for (auto& m : ref) {
      size_t at = 0;
      for (auto& p : m->params) {
        double* w = p.tensor.data<double>();
        for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] = mean[at++];
      }
    }
  }
  const std::vector<double> expected = ref[0]->values();

  std::vector<std::vector<double>> got(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(rank == 0 ? 7 : 100 + static_cast<uint64_t>(rank));  // setup() broadcasts rank 0's
    SkeletonPartition sk(comm, {.fraction = 1.0, .every = 3, .seed = 5});
    sk.setup(m.params, {}, {{"lr", kLr}});
    for (int64_t s = 0; s < steps; ++s) {
      m.sgd_step(s, rank, world);
      sk.after_step();
    }
    sk.finish();
    EXPECT_EQ(std::count(sk.in_skeleton().begin(), sk.in_skeleton().end(), 1), sk.entries());
    got[static_cast<size_t>(rank)] = m.values();
  });
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(got[static_cast<size_t>(r)][i], expected[i], 1e-12) << "rank " << r << " entry " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, FractionOne, ::testing::Values(1, 2, 3, 4, 5));

// What one rank saw at every step: slot 0 is after setup, slot s+1 after
// step s's after_step(); `trained` is after the local SGD step, before it.
struct Seen {
  std::vector<std::vector<double>> trained, grads, values;
  std::vector<std::vector<uint8_t>> skeleton;
  std::vector<std::vector<int32_t>> owners;
};

class Partition : public ::testing::TestWithParam<int> {};

TEST_P(Partition, EntriesOutsideTheSkeletonMoveOnlyOnTheirOwnerAndMergesAgree) {
  const int world = GetParam();
  const int64_t steps = 8, every = 3;
  const double fraction = 0.25;
  std::vector<Seen> seen(static_cast<size_t>(world));
  std::vector<std::vector<double>> final_values(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(rank == 0 ? 7 : 100 + static_cast<uint64_t>(rank));
    SkeletonPartition sk(comm, {.fraction = fraction, .every = every, .seed = 9});
    sk.setup(m.params, {}, {});
    Seen& me = seen[static_cast<size_t>(rank)];
    auto record = [&] {
      me.values.push_back(m.values());
      me.skeleton.push_back(sk.in_skeleton());
      me.owners.push_back(sk.owners());
    };
    record();
    for (int64_t s = 0; s < steps; ++s) {
      m.sgd_step(s, rank, world);
      me.trained.push_back(m.values());
      me.grads.push_back(m.grads());
      sk.after_step();
      record();
    }
    EXPECT_EQ(sk.rounds(), steps / every);
    sk.finish();
    final_values[static_cast<size_t>(rank)] = m.values();
  });

  const Seen& r0 = seen[0];
  const size_t n = r0.values[0].size();
  const int64_t k = skeleton_size(static_cast<int64_t>(n), fraction);
  // The first skeleton: the top fraction by |w| (no gradient yet).
  std::vector<double> start(n);
  for (size_t i = 0; i < n; ++i) start[i] = std::abs(r0.values[0][i]);
  EXPECT_EQ(r0.skeleton[0], top_by_sort(start, k));

  for (size_t slot = 0; slot <= static_cast<size_t>(steps); ++slot) {
    for (int r = 1; r < world; ++r) {  // one partition on every rank
      ASSERT_EQ(seen[static_cast<size_t>(r)].skeleton[slot], r0.skeleton[slot]) << "slot " << slot;
      ASSERT_EQ(seen[static_cast<size_t>(r)].owners[slot], r0.owners[slot]) << "slot " << slot;
    }
    ASSERT_EQ(std::count(r0.skeleton[slot].begin(), r0.skeleton[slot].end(), 1), k);
    for (size_t i = 0; i < n; ++i) {  // skeleton entries unowned, the others owned once
      ASSERT_EQ(r0.owners[slot][i] < 0, r0.skeleton[slot][i] == 1) << "slot " << slot << " entry " << i;
    }
  }

  for (int64_t s = 0; s < steps; ++s) {
    const size_t before = static_cast<size_t>(s), after = before + 1;
    const std::vector<uint8_t>& in = r0.skeleton[before];  // the partition step s trained under
    const std::vector<int32_t>& owner = r0.owners[before];
    const bool merge = (s + 1) % every == 0;
    int64_t moved_on_owner = 0;
    for (size_t i = 0; i < n; ++i) {
      double mean = 0;
      for (const Seen& x : seen) mean += x.trained[before][i] / world;
      for (int r = 0; r < world; ++r) {
        const Seen& x = seen[static_cast<size_t>(r)];
        const double v = x.values[after][i];
        if (in[i]) {
          ASSERT_NEAR(v, mean, 1e-12) << "skeleton entry " << i << " step " << s << " rank " << r;
        } else if (merge) {  // every rank takes the owner's value
          ASSERT_EQ(v, seen[static_cast<size_t>(owner[i])].trained[before][i]) << "entry " << i << " step " << s;
        } else if (owner[i] == r) {
          ASSERT_EQ(v, x.trained[before][i]);
          moved_on_owner += v != x.values[before][i];
        } else {  // back to the value of the last merge
          ASSERT_EQ(v, x.values[before][i]) << "entry " << i << " moved on rank " << r << " at step " << s;
        }
      }
    }
    if (!merge) {
      EXPECT_GT(moved_on_owner, static_cast<int64_t>(n - static_cast<size_t>(k)) / 2) << "step " << s;
      continue;
    }
    // The new skeleton: top fraction by |merged w| + |grad w|, the gradient
    // averaged where the skeleton was, else the owner's.
    std::vector<double> importance(n);
    for (size_t i = 0; i < n; ++i) {
      double g = 0;
      if (in[i]) {
        for (const Seen& x : seen) g += x.grads[before][i] / world;
      } else {
        g = seen[static_cast<size_t>(owner[i])].grads[before][i];
      }
      importance[i] = std::abs(r0.values[after][i]) + std::abs(g);
    }
    EXPECT_EQ(r0.skeleton[after], top_by_sort(importance, k)) << "step " << s;
    EXPECT_NE(r0.owners[after], owner) << "owners drawn again at step " << s;
  }
  // finish() merges the steps since the last merge: one model everywhere.
  for (int r = 1; r < world; ++r) EXPECT_EQ(final_values[static_cast<size_t>(r)], final_values[0]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Worlds, Partition, ::testing::Values(2, 3, 4));

TEST(Skeleton, CheckpointHoldsTheMergedModelAndResumesWithTheSamePartition) {
  const int world = 3;
  const SkeletonOptions o{.fraction = 0.3, .every = 4, .seed = 2};
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    SkeletonPartition sk(comm, o);
    sk.setup(m.params, {}, {});
    for (int64_t s = 0; s < 6; ++s) {  // merged after step 4, two steps apart since
      m.sgd_step(s, rank, world);
      sk.after_step();
    }
    const std::vector<double> live = m.values();
    const nn::NamedTensors state = sk.model_state(m.net);
    EXPECT_EQ(m.values(), live) << "checkpointing must leave the replicas as they are";
    std::vector<std::vector<double>> parts;
    for (const auto& [name, t] : state) parts.push_back(t.to_vector<double>());
    sk.merge();
    EXPECT_EQ(concat(parts), m.values()) << "the checkpoint holds what a merge gives";
    EXPECT_NE(concat(parts), live);

    Replica resumed(50 + static_cast<uint64_t>(rank));
    resumed.net.load_state_dict(state);
    SkeletonPartition again(comm, o);
    again.load_state_dict(sk.state_dict());  // before setup, as the trainer resumes
    again.setup(resumed.params, {}, {});
    EXPECT_EQ(again.in_skeleton(), sk.in_skeleton());
    EXPECT_EQ(again.owners(), sk.owners());
    EXPECT_EQ(again.rounds(), sk.rounds());
    for (int64_t s = 6; s < 11; ++s) {  // across the merge after step 8
      m.sgd_step(s, rank, world);
      sk.after_step();
      resumed.sgd_step(s, rank, world);
      again.after_step();
    }
    EXPECT_EQ(resumed.values(), m.values()) << "rank " << rank;
  });
}

TEST(Skeleton, RanksThatChooseDifferentSkeletonsTakeDataRankZeros) {
  // Only rounding that differs between ranks could split the choice in a
  // run; different fractions per rank force it here.
  const int world = 3;
  std::vector<std::vector<uint8_t>> skeleton(world);
  std::vector<std::vector<int32_t>> owners(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    SkeletonPartition sk(comm, {.fraction = 0.2 + 0.1 * rank, .every = 2});
    sk.setup(m.params, {}, {});
    skeleton[static_cast<size_t>(rank)] = sk.in_skeleton();
    owners[static_cast<size_t>(rank)] = sk.owners();
    for (int64_t s = 0; s < 3; ++s) {  // the exchanges run on the agreed packing
      m.sgd_step(s, rank, world);
      sk.after_step();
    }
  });
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(skeleton[static_cast<size_t>(r)], skeleton[0]);
    EXPECT_EQ(owners[static_cast<size_t>(r)], owners[0]);
  }
  EXPECT_EQ(std::count(skeleton[0].begin(), skeleton[0].end(), 1), skeleton_size(66, 0.2));
}

TEST(Skeleton, RefusesACheckpointOfAnotherModel) {
  on_ranks(1, [&](int, comm::Communicator comm) {
    Replica m(7);
    SkeletonPartition sk(comm, {});
    sk.load_state_dict({{"steps", 4}, {"round", 1}, {"entries", 5}, {"skeleton", "1"}});
    const std::string msg = test::message_of<ConfigError>([&] { sk.setup(m.params, {}, {}); });
    EXPECT_NE(msg.find("covers 5 entries, this model has 66"), std::string::npos) << msg;
  });
}

TEST(Skeleton, AWaitThatTimesOutNamesRankOperationAndWait) {
  std::string msg;
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    Replica m(7);
    SkeletonPartition sk(comm, {.fraction = 0.5, .every = 100, .timeout = std::chrono::milliseconds(200)});
    sk.setup(m.params, {}, {});
    if (rank == 1) {  // alive but never steps
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    m.sgd_step(0, 0, 2);
    msg = test::message_of<TimeoutError>([&] { sk.after_step(); });
  });
  for (const char* part : {"rank 0 of 2 on the data axis", "all-reduce of the skeleton", "after step 1", "waited"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  }
}

comm::Communicator one_rank() {
  return comm::Communicator(std::shared_ptr<comm::Transport>(comm::InprocWorld::create(1)->transport(0)));
}

TEST(SkeletonPlan, BuiltByNameAndRefusedWhereReplicasCannotTrainApart) {
  auto net = std::make_shared<ToyNet>(7);
  PlannedModel pm = make_plan({.strategy = "skeleton"}, one_rank(), nullptr, net, mse);
  EXPECT_NE(pm.plan->describe().find("aggregation skeleton"), std::string::npos) << pm.plan->describe();
  EXPECT_FALSE(pm.plan->owns_optimizer());
  EXPECT_EQ(pm.plan->grad_sync_name(), "");
  const std::string bn = test::message_of<ConfigError>(
      [&] { make_plan({.strategy = "skeleton", .sync_batch_norm = true}, one_rank(), nullptr, net, mse); });
  EXPECT_NE(bn.find("synchronised batch norm"), std::string::npos) << bn;
  const std::string tp = test::message_of<ConfigError>(
      [&] { make_plan({.strategy = "skeleton", .mesh = {.tensor = 2}}, one_rank(), nullptr, net, mse); });
  EXPECT_NE(tp.find("parallel.tensor must be 1"), std::string::npos) << tp;
}

}  // namespace
}  // namespace braid::parallel::skeleton
