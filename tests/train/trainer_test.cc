// The trainer loop on a small synthetic problem: it learns, evaluates,
// resumes bit-exactly, and stops on a NaN loss with the last checkpoint intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/checkpoint.h"
#include "braid/train/trainer.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/train/blobs.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

using testing::Blobs;
using test::TempDir;

// 4 inputs -> 16 -> 3 classes (the blobs), the same weights every call.
std::shared_ptr<nn::Module> blobs_mlp() {
  Generator gen(11);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 3, gen)});
}

std::unique_ptr<Trainer> make_trainer(const std::string& out_dir, TrainerOptions o, nn::LossFn loss = nn::cross_entropy_loss,
                                      double lr = 0.1) {
  auto model = blobs_mlp();
  auto train_set = std::make_shared<Blobs>(300, 1);
  auto test_set = std::make_shared<Blobs>(90, 2);
  auto train = std::make_shared<data::Loader>(train_set, std::make_shared<data::ShuffledSampler>(300, 5),
                                              data::LoaderOptions{.batch_size = 32, .workers = 0});
  auto test = std::make_shared<data::Loader>(test_set, std::make_shared<data::SequentialSampler>(90),
                                             data::LoaderOptions{.batch_size = 64, .workers = 0});
  auto opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = lr, .momentum = 0.9});
  o.out_dir = out_dir;
  return std::make_unique<Trainer>(model, std::move(opt), nullptr, loss, train, test, o);
}

class Recorder final : public Callback {
 public:
  void on_log(const StepMetrics& m) override { logs.push_back(m); }
  void on_eval(const EvalMetrics& m) override { evals.push_back(m); }
  void on_message(const std::string& t) override { messages.push_back(t); }
  void on_train_begin(int64_t, int64_t total) override { total_steps = total; }
  int64_t total_steps = 0;
  std::vector<StepMetrics> logs;
  std::vector<EvalMetrics> evals;
  std::vector<std::string> messages;
};

TEST(Trainer, LearnsAndEvaluates) {
  TempDir dir;
  auto t = make_trainer(dir.path().string(), {.epochs = 3, .log_every = 5});
  auto rec = std::make_shared<Recorder>();
  t->add_callback(rec);
  const TrainSummary s = t->fit();
  EXPECT_EQ(s.steps, 3 * 10);  // ceil(300 / 32) = 10 batches per epoch
  ASSERT_TRUE(s.has_eval);
  EXPECT_GT(s.last_eval.top1, 0.9);
  EXPECT_DOUBLE_EQ(s.last_eval.top5, 1.0);  // 3 classes: always in the top 5
  EXPECT_EQ(s.last_eval.examples, 90);
  EXPECT_EQ(rec->evals.size(), 3u);
  ASSERT_FALSE(rec->logs.empty());
  EXPECT_LT(rec->logs.back().loss, rec->logs.front().loss);
  EXPECT_GT(rec->logs.back().samples_per_s, 0);
  EXPECT_EQ(list_checkpoints(dir.path().string()), (std::vector<int64_t>{10, 20, 30}));
}

TEST(Trainer, EvalStepsEvaluatesWithinEpochsToo) {
  // 10 steps per epoch, every 4 steps: steps 4 and 8 within each epoch, and
  // each epoch's end (step 12 falls in epoch 2, 20 is an end, not twice).
  TempDir dir;
  auto t = make_trainer(dir.path().string(), {.epochs = 2, .log_every = 5, .eval_steps = 4, .checkpoints = false});
  auto rec = std::make_shared<Recorder>();
  t->add_callback(rec);
  t->fit();
  std::vector<std::pair<int64_t, bool>> got;
  for (const auto& e : rec->evals) got.emplace_back(e.step, e.within_epoch);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, bool>>{{4, true}, {8, true}, {10, false}, {12, true}, {16, true},
                                                         {20, false}}));
  for (const auto& e : rec->evals) EXPECT_EQ(e.examples, 90);
}

TEST(Trainer, ResumeContinuesExactly) {
  TempDir a, b;
  auto straight = make_trainer(a.path().string(), {.epochs = 2, .checkpoint_every = 7});
  straight->fit();
  // Same run stopped after 13 steps (mid-epoch 2), then resumed.
  auto first = make_trainer(b.path().string(), {.epochs = 2, .max_steps = 13, .checkpoint_every = 7});
  first->fit();
  fs::remove(checkpoint_stem(b.path().string(), 13) + ".json");  // keep only step 7 so resume starts mid-epoch 1
  fs::remove(checkpoint_stem(b.path().string(), 13) + ".safetensors");
  auto resumed = make_trainer(b.path().string(), {.epochs = 2, .checkpoint_every = 7, .resume = Resume::always});
  auto rec = std::make_shared<Recorder>();
  resumed->add_callback(rec);
  resumed->fit();
  EXPECT_EQ(resumed->step(), 20);
  ASSERT_FALSE(rec->messages.empty());
  EXPECT_NE(rec->messages[0].find("resumed from"), std::string::npos) << rec->messages[0];
  const auto pa = straight->model().state_dict(), pb = resumed->model().state_dict();
  // Equal up to float rounding: the GEMM layer autotunes its kernel per shape
  // online, so two runs in one process may sum in different orders.
  for (size_t i = 0; i < pa.size(); ++i) {
    const auto va = pa[i].second.to_vector<float>(), vb = pb[i].second.to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t k = 0; k < va.size(); ++k) ASSERT_NEAR(va[k], vb[k], 1e-5 + 1e-5 * std::abs(va[k])) << pa[i].first;
  }
  // ... and different from a run that did not resume (restarted from scratch for 7 steps).
  auto fresh = make_trainer(b.path().string() + "_none", {.epochs = 2, .max_steps = 7, .checkpoints = false});
  fresh->fit();
  EXPECT_NE(fresh->model().state_dict()[0].second.to_vector<float>(), pb[0].second.to_vector<float>());
}

TEST(Trainer, NanLossStopsAndKeepsLastCheckpoint) {
  TempDir dir;
  int calls = 0;
  // The loss turns NaN at step 9, after the checkpoint of step 5.
  nn::LossFn poisoned = [&calls](const Tensor& out, const Tensor& target) {
    Tensor l = nn::cross_entropy_loss(out, target);
    return ++calls >= 9 ? mul(l, NAN) : l;
  };
  auto t = make_trainer(dir.path().string(), {.epochs = 2, .checkpoint_every = 5}, poisoned);
  try {
    t->fit();
    FAIL() << "NaN loss did not stop training";
  } catch (const NumericError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 9"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ckpt-00000005"), std::string::npos) << msg;
  }
  EXPECT_EQ(t->step(), 8);  // the bad step never reached the optimizer
  EXPECT_EQ(list_checkpoints(dir.path().string()), std::vector<int64_t>{5});
  const Checkpoint c = load_checkpoint(checkpoint_stem(dir.path().string(), 5));
  for (const auto& [n, w] : c.model) {
    for (float v : w.to_vector<float>()) ASSERT_TRUE(std::isfinite(v)) << n;
  }
}

TEST(Trainer, GradClipBoundsTheUpdate) {
  TempDir dir;
  // lr 1e3 without clipping diverges; with clip 1e-3 the first update moves
  // the weights by at most lr * clip (one step, momentum not yet built up).
  auto t = make_trainer(dir.path().string(), {.epochs = 1, .max_steps = 1, .grad_clip = 1e-3, .checkpoints = false},
                        nn::cross_entropy_loss, 1e3);
  const auto before = t->model().state_dict();
  std::vector<std::vector<float>> w0;
  for (const auto& [n, w] : before) w0.push_back(w.to_vector<float>());
  t->fit();
  double sq = 0;
  const auto after = t->model().state_dict();
  for (size_t i = 0; i < after.size(); ++i) {
    const auto w1 = after[i].second.to_vector<float>();
    for (size_t k = 0; k < w1.size(); ++k) sq += (w1[k] - w0[i][k]) * (w1[k] - w0[i][k]);
  }
  EXPECT_LE(std::sqrt(sq), 1e3 * 1e-3 * 1.001);
  EXPECT_GT(std::sqrt(sq), 0.5);
}

std::shared_ptr<BatchSchedule> doubling_batches() {
  return std::make_shared<BatchSchedule>(BatchScheduleOptions{.rule = "epoch", .batch = 32, .growth = 2});
}

bool mentions(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

TEST(Trainer, BatchScheduleGrowsTheBatchAndScalesTheLearningRate) {
  TempDir dir;
  auto schedule = doubling_batches();
  auto t = make_trainer(dir.path().string(), {.epochs = 3, .log_every = 5, .batch_schedule = schedule});
  auto rec = std::make_shared<Recorder>();
  t->add_callback(rec);
  const TrainSummary s = t->fit();
  EXPECT_EQ(s.steps, 10 + 5 + 3);  // 300 examples in batches of 32, 64, 128
  EXPECT_EQ(rec->total_steps, 18);
  EXPECT_DOUBLE_EQ(t->optimizer().lr(), 0.1 * 4);  // linear rule, batch x4
  EXPECT_EQ(schedule->schedule_step(), 900 / 32);
  EXPECT_TRUE(mentions(rec->messages, "batch size 64 per rank")) << ::testing::PrintToString(rec->messages);
  EXPECT_TRUE(mentions(rec->messages, "batch size 128 per rank"));
  EXPECT_GT(s.last_eval.top1, 0.9);
}

TEST(Trainer, ResumeWithABatchScheduleContinuesExactly) {
  TempDir a, b;
  auto straight = make_trainer(a.path().string(), {.epochs = 3, .checkpoint_every = 4, .batch_schedule = doubling_batches()});
  straight->fit();
  // Stopped after 13 steps; the last checkpoint (step 12) is 2 batches of 64 into epoch 2.
  auto first = make_trainer(b.path().string(),
                            {.epochs = 3, .max_steps = 13, .checkpoint_every = 4, .batch_schedule = doubling_batches()});
  first->fit();
  auto resumed = make_trainer(b.path().string(), {.epochs = 3, .checkpoint_every = 4, .resume = Resume::always,
                                                  .batch_schedule = doubling_batches()});
  resumed->fit();
  EXPECT_EQ(resumed->step(), 18);
  EXPECT_DOUBLE_EQ(resumed->optimizer().lr(), straight->optimizer().lr());
  const auto pa = straight->model().state_dict(), pb = resumed->model().state_dict();
  for (size_t i = 0; i < pa.size(); ++i) {
    const auto va = pa[i].second.to_vector<float>(), vb = pb[i].second.to_vector<float>();
    for (size_t k = 0; k < va.size(); ++k) ASSERT_NEAR(va[k], vb[k], 1e-5 + 1e-5 * std::abs(va[k])) << pa[i].first;
  }
}

// Two data-parallel ranks grow their batch by the gradient noise scale: they
// take the same batch every epoch (else the all-reduce would pair different
// steps) and end with the same weights.
TEST(Trainer, NoiseRuleTakesTheSameBatchOnEveryRank) {
  const int world = 2;
  std::vector<int64_t> batches(world), steps(world);
  std::vector<std::vector<float>> weights(world);
  parallel::testing::on_ranks(world, [&](int r, comm::Communicator comm) {
    std::shared_ptr<nn::Module> model = blobs_mlp();
    parallel::PlannedModel planned =
        parallel::make_plan({.strategy = "allreduce"}, comm, nullptr, model, nn::cross_entropy_loss);
    auto train = std::make_shared<data::Loader>(
        std::make_shared<Blobs>(600, 1),
        std::make_shared<data::DistributedSampler>(600, data::DistributedSamplerOptions{.rank = r, .world = world}),
        data::LoaderOptions{.batch_size = 2, .workers = 0});
    auto schedule = std::make_shared<BatchSchedule>(
        BatchScheduleOptions{.rule = "noise", .batch = 2, .growth = 2, .noise_window = 2, .replicas = world});
    auto opt = std::make_unique<optim::SGD>(planned.model->parameters(), optim::SGDOptions{.lr = 0.05});
    Trainer t(planned.model, std::move(opt), nullptr, planned.loss, train, nullptr,
              {.epochs = 4, .checkpoints = false, .batch_schedule = schedule});
    t.set_plan(std::move(planned.plan));
    t.fit();
    batches[r] = schedule->batch();
    steps[r] = t.step();
    weights[r] = t.model().parameters()[0].to_vector<float>();
  });
  EXPECT_GT(batches[0], 2) << "the batch never grew";
  EXPECT_EQ(batches[0], batches[1]);
  EXPECT_EQ(steps[0], steps[1]);
  EXPECT_EQ(weights[0], weights[1]);
}

// Synchronous data-parallel replicas hold the same model, so each evaluates
// a share of the test set (91 examples over 3 ranks: 30, 30, 31, in batches
// of 8 that do not divide them) and the summed counts are the whole set's
// figures, the same on every rank as one rank's pass over all of it. Plans
// whose replicas differ (local SGD) or whose forward is collective (ZeRO-3)
// evaluate the whole set.
TEST(Trainer, SynchronousReplicasEvaluateTheirSharesOfTheTestSet) {
  const int world = 3;
  const int64_t n = 91;
  std::vector<EvalMetrics> shared(world), whole(world);
  parallel::testing::on_ranks(world, [&](int r, comm::Communicator comm) {
    std::shared_ptr<nn::Module> model = blobs_mlp();
    parallel::PlannedModel planned =
        parallel::make_plan({.strategy = "allreduce"}, comm, nullptr, model, nn::cross_entropy_loss);
    EXPECT_TRUE(planned.plan->evaluates_shares());
    EXPECT_TRUE(planned.plan->evaluation_is_collective());
    auto train = std::make_shared<data::Loader>(
        std::make_shared<Blobs>(300, 1),
        std::make_shared<data::DistributedSampler>(300, data::DistributedSamplerOptions{.rank = r, .world = world}),
        data::LoaderOptions{.batch_size = 8, .workers = 0});
    auto test_set = std::make_shared<Blobs>(n, 2);
    auto share = std::make_shared<data::Loader>(test_set, std::make_shared<data::SequentialSampler>(n, r, world),
                                                data::LoaderOptions{.batch_size = 8, .workers = 0});
    data::Loader all(test_set, std::make_shared<data::SequentialSampler>(n), {.batch_size = 8, .workers = 0});
    auto opt = std::make_unique<optim::SGD>(planned.model->parameters(), optim::SGDOptions{.lr = 0.05});
    Trainer t(planned.model, std::move(opt), nullptr, planned.loss, train, share,
              {.epochs = 1, .test_shares = true, .checkpoints = false});
    t.set_plan(std::move(planned.plan));
    t.fit();
    shared[r] = t.evaluate();
    whole[r] = t.evaluate(all);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(shared[r].examples, n) << "rank " << r;
    EXPECT_EQ(shared[r].top1, whole[0].top1) << "rank " << r;
    EXPECT_NEAR(shared[r].loss, whole[0].loss, 1e-6) << "rank " << r;
    EXPECT_EQ(whole[r].top1, whole[0].top1);  // the replicas are the same model
  }
  EXPECT_GT(whole[0].top1, 0.5);  // it learned: the figures are not all alike by accident

  parallel::testing::on_ranks(2, [&](int, comm::Communicator comm) {
    std::shared_ptr<nn::Module> model = blobs_mlp();
    const auto local = parallel::make_plan({.strategy = "local_sgd"}, comm, nullptr, model, nn::cross_entropy_loss);
    EXPECT_FALSE(local.plan->evaluates_shares());
    EXPECT_FALSE(local.plan->evaluation_is_collective());  // a rank that does not report may skip it
    const auto zero3 =
        parallel::make_plan({.strategy = "zero", .zero = {.stage = 3}}, comm, nullptr, model, nn::cross_entropy_loss);
    EXPECT_FALSE(zero3.plan->evaluates_shares());
    EXPECT_TRUE(zero3.plan->evaluation_is_collective());
  });
}

TEST(Trainer, CountTopK) {
  Tensor logits = Tensor::from_vector<float>({0.1f, 0.9f, 0.0f, 0.5f, 0.2f, 0.3f}, {2, 3});
  Tensor targets = Tensor::from_vector<int64_t>({1, 2}, {2});
  const TopK k = count_topk(logits, targets);
  EXPECT_EQ(k.n, 2);
  EXPECT_EQ(k.top1, 1);
  EXPECT_EQ(k.top5, 2);
  EXPECT_THROW(count_topk(logits, Tensor::from_vector<int64_t>({1, 5}, {2})), IndexError);
}

}  // namespace
}  // namespace braid::train
