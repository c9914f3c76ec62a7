// The bucketed all-reduce against an independent reference: N ranks x batch b
// for K SGD steps must give the parameters of 1 process x batch N*b.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/comm/transport/inproc.h"
#include "braid/ops/ops.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/linear.h"
#include "braid/ops/reduce.h"
#include "braid/parallel/bucketed_allreduce.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_model.h"
#include "tests/testing/first_error.h"

namespace braid::parallel {
namespace {

using testing::kBatch;
using testing::kIn;
using testing::kLr;
using testing::kOut;
using testing::kSteps;
using Model = testing::ToyModel<double>;

Tensor randn(const Shape& shape, Generator& g) { return testing::randn<double>(shape, g); }
std::pair<Tensor, Tensor> global_batch(int64_t step, int64_t rows) { return testing::global_batch<double>(step, rows); }

std::vector<std::vector<double>> train_single(int world) { return testing::train_single<double>(world); }

using testing::on_ranks;

class Equivalence : public ::testing::TestWithParam<int> {};

TEST_P(Equivalence, NWorkersEqualOneWorkerWithNTimesTheBatch) {
  const int world = GetParam();
  const auto expected = train_single(world);
  std::vector<std::vector<std::vector<double>>> got(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    // Ranks start from different inits; setup() must broadcast rank 0's.
    Model m(rank == 0 ? 7 : 100 + static_cast<uint64_t>(rank));
    BucketedAllreduce s(comm, {.bucket_bytes = 64});  // several buckets
    s.setup(m.params, {}, {{"lr", kLr}});
    connect_grad_hooks(s, m.params);
    for (int64_t step = 0; step < kSteps; ++step) {
      auto [x, t] = global_batch(step, world * kBatch);
      Tensor xs = slice(x, 0, rank * kBatch, (rank + 1) * kBatch);
      Tensor ts = slice(t, 0, rank * kBatch, (rank + 1) * kBatch);
      backward(m.loss(xs, ts));
      s.finish();
      m.sgd_step();
    }
    EXPECT_GT(s.bucket_count(), 1u);
    for (auto& p : m.params) got[rank].push_back(p.tensor.to_vector<double>());
  });
  for (int r = 0; r < world; ++r) {
    for (size_t k = 0; k < expected.size(); ++k) {
      for (size_t i = 0; i < expected[k].size(); ++i) {
        ASSERT_NEAR(got[r][k][i], expected[k][i], 1e-10) << "rank " << r << " param " << k << " elem " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Equivalence, ::testing::Values(1, 2, 3, 4));

TEST(Allreduce, NoSyncAccumulatesLocallyThenAverages) {
  // Two micro-batches without sync, then one with sync, equal one step of the
  // mean of all three local gradients' sums averaged over ranks.
  const int world = 2;
  std::vector<std::vector<double>> grads(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    Model m(7);
    BucketedAllreduce s(comm);
    s.setup(m.params, {}, {});
    connect_grad_hooks(s, m.params);
    Generator g(50 + static_cast<uint64_t>(rank));
    s.set_sync(false);
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    s.set_sync(true);
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    s.finish();
    grads[rank] = m.params[0].tensor.grad().to_vector<double>();
  });
  // Reference: each rank's two local gradients summed, averaged over ranks.
  std::vector<double> expected(grads[0].size(), 0.0);
  for (int rank = 0; rank < world; ++rank) {
    Model m(7);
    Generator g(50 + static_cast<uint64_t>(rank));
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    auto v = m.params[0].tensor.grad().to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) expected[i] += v[i] / world;
  }
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(grads[r][i], expected[i], 1e-12);
}

TEST(Allreduce, OverlapStartsBucketsDuringBackward) {
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    Model m(7);
    BucketedAllreduce s(comm, {.bucket_bytes = 64});
    s.setup(m.params, {}, {});
    connect_grad_hooks(s, m.params);
    Generator g(3);
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    EXPECT_EQ(s.buckets_launched_early(), s.bucket_count());  // all started before before_step
    s.finish();
  });
}

TEST(Allreduce, BuffersFollowRankZeroLikeDdp) {
  std::vector<std::vector<double>> got(3);
  on_ranks(3, [&](int rank, comm::Communicator comm) {
    Model m(7);
    Tensor running = Tensor::from_vector(std::vector<double>(4, rank), {4});
    Tensor count = Tensor::from_vector(std::vector<int64_t>{rank}, {1});
    BucketedAllreduce s(comm);
    s.setup(m.params, {{"bn.running_mean", running}, {"bn.num_batches_tracked", count}}, {});
    EXPECT_EQ(running.to_vector<double>(), std::vector<double>(4, 0.0));
    EXPECT_EQ(count.to_vector<int64_t>(), std::vector<int64_t>{0});
    // Each rank's forward updates its own statistics; after the step rank 0's win.
    running.fill(10.0 + rank);
    Generator g(3);
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    s.finish();
    s.after_step();
    got[static_cast<size_t>(rank)] = running.to_vector<double>();
  });
  for (const auto& v : got) EXPECT_EQ(v, std::vector<double>(4, 10.0));
}

// Rank 1 joins bucket 0 late (600 ms) and never joins bucket 1, staying alive.
// Bucket 1 starts on rank 0 only when bucket 0 ends, after finish() began
// waiting; its own timeout (1 s from its start) must be what rank 0 reports,
// naming rank 1, not a bare "timed out waiting for rank 0 allreduce #K" from a
// wait whose deadline ran from finish()'s start.
TEST(Allreduce, ABucketQueuedBehindASlowOneReportsItsOwnTimeout) {
  struct Rank1Hook : BucketHook {
    comm::Work run(comm::Communicator& comm, const GradBucket& bucket, bool background) override {
      if (bucket.index != 0) return comm::Work::completed();
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return comm.allreduce({bucket.flat.raw_data(), static_cast<size_t>(bucket.flat.numel()), bucket.flat.dtype()},
                            {.op = comm::Op::avg, .algorithm = comm::Algorithm::ring, .background = background});
    }
  };
  std::string message;
  std::latch rank0_done(1);
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    Model m(7);
    BucketedAllreduce s(comm, {.bucket_bytes = 64, .algorithm = comm::Algorithm::ring, .timeout = std::chrono::seconds(1)},
                        rank == 1 ? std::make_unique<Rank1Hook>() : nullptr);
    s.setup(m.params, {}, {});
    ASSERT_GE(s.bucket_count(), 2u);
    connect_grad_hooks(s, m.params);
    Generator g(3);
    backward(m.loss(randn({2, kIn}, g), randn({2, kOut}, g)));
    if (rank == 1) {
      s.finish();
      rank0_done.wait();  // alive, answering rank 0's questions
      return;
    }
    try {
      s.finish();
    } catch (const TimeoutError& e) {
      message = e.what();
    }
    rank0_done.count_down();
  });
  EXPECT_NE(message.find("timed out after"), std::string::npos) << message;
  EXPECT_NE(message.find("waiting for rank 1; rank 1 never started"), std::string::npos) << message;
}

TEST(Allreduce, RanksThatDisagreeAreNamed) {
  try {
    on_ranks(3, [&](int rank, comm::Communicator comm) {
      Model m(7);
      BucketedAllreduce s(comm);
      s.setup(m.params, {}, {{"optim", {{"lr", rank == 2 ? 0.5 : 0.1}}}});
    });
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ranks [2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/config/optim/lr"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace braid::parallel
