// Gradient accumulation (TrainerOptions::accumulate, train.accumulate): A
// micro-batches of b rows train the parameters one batch of A x b rows
// would, in one process and data parallel, where the gradients cross the
// data axis once per optimizer step, not once per micro-batch.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/comm/transport/inproc.h"
#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/trainer.h"
#include "tests/testing/first_error.h"
#include "tests/train/blobs.h"

namespace braid::train {
namespace {

using testing::Blobs;
using Params = std::vector<std::vector<float>>;

// 300 blobs in order: with b = 8 and A = 4 a step reads rows [32 k, 32 k + 32)
// as batch 32 does, and the epoch's last step both ways holds rows 288-299
// (micro-batches of 8 and 4 rows against one of 12).
constexpr int64_t kExamples = 300;

std::shared_ptr<nn::Module> mlp() {
  Generator gen(11);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 3, gen)});
}

Params values(nn::Module& m) {
  Params out;
  for (const Tensor& p : m.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

void expect_near(const Params& a, const Params& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k) ASSERT_NEAR(a[i][k], b[i][k], 2e-6 + 2e-6 * std::abs(b[i][k])) << i << "[" << k << "]";
  }
}

// One epoch of SGD with momentum over this rank's share (sequential order).
struct Result {
  Params params;
  int64_t steps = 0;
};
Result train(int64_t batch, int64_t accumulate, int rank = 0, int world = 1,
          std::shared_ptr<parallel::Plan> plan = nullptr, std::shared_ptr<nn::Module> model = nullptr,
          nn::LossFn loss = nn::cross_entropy_loss) {
  if (!model) model = mlp();
  auto loader = std::make_shared<data::Loader>(std::make_shared<Blobs>(kExamples, 1),
                                               std::make_shared<data::SequentialSampler>(kExamples, rank, world),
                                               data::LoaderOptions{.batch_size = batch, .workers = 0});
  const std::vector<Tensor> params = plan ? plan->optimizer_parameters(*model) : model->parameters();
  auto opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.2, .momentum = 0.9});
  Trainer t(model, std::move(opt), nullptr, loss, loader, nullptr,
            {.epochs = 1, .accumulate = accumulate, .eval_every = 0, .checkpoints = false});
  if (plan) t.set_plan(std::move(plan));
  const TrainSummary s = t.fit();
  return {values(*model), s.steps};
}

TEST(Accumulate, MicroBatchesTrainAsOneBatch) {
  const Result whole = train(32, 1), micro = train(8, 4);
  EXPECT_EQ(whole.steps, 10);  // ceil(300 / 32)
  EXPECT_EQ(micro.steps, 10);  // ceil(38 batches / 4)
  expect_near(micro.params, whole.params);
  // ... and not as 38 steps of 8 rows.
  const Result small = train(8, 1);
  EXPECT_EQ(small.steps, 38);
  EXPECT_GT(std::abs(small.params[0][0] - whole.params[0][0]), 1e-4);
}

// Counts the bytes a rank hands to its transport.
class Tap final : public comm::Transport {
 public:
  Tap(std::unique_ptr<comm::Transport> inner, std::atomic<size_t>& sent) : inner_(std::move(inner)), sent_(sent) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return "tap+" + inner_->name(); }
  comm::Work send(int peer, uint64_t tag, std::span<const std::byte> data) override {
    sent_ += data.size();
    return inner_->send(peer, tag, data);
  }
  comm::Work recv(int peer, uint64_t tag, std::span<std::byte> data) override { return inner_->recv(peer, tag, data); }

 private:
  std::unique_ptr<comm::Transport> inner_;
  std::atomic<size_t>& sent_;
};

struct DataParallel {
  std::vector<Result> ranks;
  size_t bytes = 0;  // sent by rank 0
};

DataParallel train_data_parallel(const parallel::PlanOptions& options, int64_t batch, int64_t accumulate) {
  constexpr int kWorld = 2;
  DataParallel out;
  out.ranks.resize(kWorld);
  std::atomic<size_t> sent[kWorld] = {0, 0};
  auto inproc = comm::InprocWorld::create(kWorld);
  test::run_threads_first_error(
      kWorld,
      [&](int r) {
        set_num_threads(1);
        comm::Communicator comm(std::make_shared<Tap>(inproc->transport(r), sent[r]),
                                {.timeout = std::chrono::seconds(20)});
        parallel::PlannedModel pm = parallel::make_plan(options, comm, nullptr, mlp(), nn::cross_entropy_loss);
        out.ranks[static_cast<size_t>(r)] =
            train(batch, accumulate, r, kWorld, std::move(pm.plan), pm.model, pm.loss);
      },
      [&] { inproc->shutdown("a rank failed"); });
  out.bytes = sent[0];
  return out;
}

class AccumulateDataParallel : public ::testing::TestWithParam<int> {};

// Each of 2 replicas reads its 150 rows: 4 x 8 rows a step against 32 at
// once, all-reduce and ZeRO-2 (whose reduce-scatter fires from the same
// gradient hooks).
TEST_P(AccumulateDataParallel, OnceAStepAndAsOneBatch) {
  const int zero_stage = GetParam();
  parallel::PlanOptions o{.strategy = zero_stage > 0 ? "zero" : "allreduce"};
  if (zero_stage > 0) o.zero = {.stage = zero_stage};
  const DataParallel whole = train_data_parallel(o, 32, 1), micro = train_data_parallel(o, 8, 4);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(micro.ranks[r].steps, 5);  // ceil(19 batches / 4)
    expect_near(micro.ranks[r].params, whole.ranks[r].params);
  }
  // The same traffic: one combination a step, not one per micro-batch.
  EXPECT_GT(whole.bytes, 0u);
  EXPECT_EQ(micro.bytes, whole.bytes);
}

INSTANTIATE_TEST_SUITE_P(Plans, AccumulateDataParallel, ::testing::Values(0, 2),
                         [](const auto& info) { return info.param == 0 ? std::string("allreduce") : "zero2"; });

}  // namespace
}  // namespace braid::train
