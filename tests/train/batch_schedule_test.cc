// Batch-size schedules: the epoch rule's batches and learning-rate factors,
// the gradient noise scale estimated from gradients whose true value and
// noise are known, the noise rule's decision (taken from rank 0's figures),
// state across a resume, and every rank's sample stream staying disjoint and
// complete while the batch grows.
#include "braid/train/batch_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "braid/base/rng.h"
#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/optim/reduce.h"
#include "tests/testing/error_message.h"

namespace braid::train {
namespace {

double plain_sum_squares(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts) {
    if (t.defined()) s += optim::sum_squares(t.data<float>(), t.numel());
  }
  return s;
}

TEST(BatchSchedule, EpochRuleGrowsEveryFewEpochsUpToTheCap) {
  BatchSchedule s({.rule = "epoch", .batch = 16, .growth = 2, .every = 2, .max = 48, .lr_scaling = "linear"});
  std::vector<int64_t> batches;
  for (int64_t e = 0; e < 6; ++e) {
    s.start_epoch(e, nullptr);
    batches.push_back(s.batch());
    EXPECT_EQ(s.planned_batch(e), s.batch());
  }
  EXPECT_EQ(batches, (std::vector<int64_t>{16, 16, 32, 32, 48, 48}));
  EXPECT_DOUBLE_EQ(s.lr_factor(), 3.0);
}

TEST(BatchSchedule, LearningRateRules) {
  for (const auto& [rule, factor] : std::vector<std::pair<std::string, double>>{
           {"linear", 4.0}, {"sqrt", 2.0}, {"none", 1.0}}) {
    BatchSchedule s({.rule = "epoch", .batch = 8, .growth = 4, .lr_scaling = rule});
    s.start_epoch(0, nullptr);
    EXPECT_DOUBLE_EQ(s.lr_factor(), 1.0);
    const std::string line = s.start_epoch(1, nullptr);
    EXPECT_EQ(s.batch(), 32);
    EXPECT_DOUBLE_EQ(s.lr_factor(), factor) << rule;
    EXPECT_NE(line.find("batch size 32 per rank"), std::string::npos) << line;
  }
}

TEST(BatchSchedule, ScheduleStepCountsFirstEpochBatches) {
  BatchSchedule s({.rule = "epoch", .batch = 10});
  s.count(10);
  s.count(10);
  s.count(40);  // one grown batch is four first-epoch batches
  EXPECT_EQ(s.schedule_step(), 6);
}

TEST(BatchSchedule, BadOptionsNameTheKey) {
  EXPECT_NE(test::message_of<ConfigError>([] { BatchSchedule({.rule = "weekly"}); }).find("train.batch_schedule"),
            std::string::npos);
  EXPECT_NE(test::message_of<ConfigError>([] { BatchSchedule({.rule = "epoch", .growth = 1}); })
                .find("train.batch_growth"),
            std::string::npos);
  EXPECT_NE(test::message_of<ConfigError>([] { BatchSchedule({.rule = "epoch", .batch = 64, .max = 32}); })
                .find("train.batch_max"),
            std::string::npos);
  EXPECT_NE(test::message_of<ConfigError>([] { NoiseScale(1); }).find("train.noise_window"), std::string::npos);
}

// Gradients at batch b drawn as G + N(0, sigma^2 / b) per coordinate: the
// per-example covariance is sigma^2 I, so the noise scale is d sigma^2 / |G|^2.
TEST(NoiseScale, RecoversTraceOverGradientNormOfKnownNoise) {
  const int64_t d = 2000, batch = 32;
  const double sigma = 0.5;
  Generator gen(3);
  std::vector<float> g_true(d);
  double g2 = 0;
  for (auto& v : g_true) {
    v = static_cast<float>(0.02 * gen.normal());
    g2 += static_cast<double>(v) * v;
  }
  const double expected = static_cast<double>(d) * sigma * sigma / g2;
  NoiseScale noise(4);
  for (int step = 0; step < 400; ++step) {
    // Two tensors, as a model's parameters would be.
    Tensor a = Tensor::empty({d / 2}), b = Tensor::empty({d / 2});
    for (int64_t i = 0; i < d; ++i) {
      const float v = g_true[i] + static_cast<float>(sigma / std::sqrt(batch) * gen.normal());
      (i < d / 2 ? a.data<float>()[i] : b.data<float>()[i - d / 2]) = v;
    }
    noise.observe({a, b}, batch, plain_sum_squares);
  }
  EXPECT_EQ(noise.windows(), 100);
  const double got = NoiseScale::scale(noise.trace_sigma_sum(), noise.g2_sum());
  EXPECT_NEAR(got / expected, 1.0, 0.1) << "estimated " << got << ", true " << expected;
}

TEST(NoiseScale, AChangeOfBatchStartsANewWindow) {
  NoiseScale noise(2);
  Tensor g = Tensor::zeros({4});
  g.data<float>()[0] = 1;
  noise.observe({g}, 8, plain_sum_squares);
  noise.observe({g}, 16, plain_sum_squares);  // a new window at batch 16
  EXPECT_EQ(noise.windows(), 0);
  noise.observe({g}, 16, plain_sum_squares);
  EXPECT_EQ(noise.windows(), 1);
  // Identical gradients: no noise, |G|^2 = 1.
  EXPECT_NEAR(noise.trace_sigma_sum(), 0.0, 1e-12);
  EXPECT_NEAR(noise.g2_sum(), 1.0, 1e-12);
}

// The estimator's sums set directly (tr(Sigma) / |G|^2 = trace / g2), so the
// noise rule's decision is tested apart from the estimate above.
nlohmann::json noise_state(double trace, double g2) {
  return {{"windows", 3}, {"trace_sigma_sum", trace}, {"g2_sum", g2}};
}

TEST(BatchSchedule, NoiseRuleGrowsWhileTheGlobalBatchFitsTheNoiseScale) {
  BatchSchedule s({.rule = "noise", .batch = 16, .growth = 2, .max = 0, .replicas = 4});
  EXPECT_EQ(s.start_epoch(0, nullptr), "");  // nothing measured
  EXPECT_EQ(s.batch(), 16);
  // Noise scale 300: the global batch 4 x 32 = 128 fits; one growth per epoch.
  s.noise().load_state_dict(noise_state(300.0, 1.0));
  const std::string line = s.start_epoch(1, nullptr);
  EXPECT_EQ(s.batch(), 32);
  EXPECT_NE(line.find("gradient noise scale 300"), std::string::npos) << line;
  EXPECT_EQ(s.noise().windows(), 0);  // figures start again after a decision
  s.noise().load_state_dict(noise_state(300.0, 1.0));
  s.start_epoch(2, nullptr);
  EXPECT_EQ(s.batch(), 64);  // 256 fits
  s.noise().load_state_dict(noise_state(300.0, 1.0));
  EXPECT_EQ(s.start_epoch(3, nullptr), "");  // 512 does not
  // Below the current batch: it never shrinks.
  s.noise().load_state_dict(noise_state(10.0, 1.0));
  EXPECT_EQ(s.start_epoch(4, nullptr), "");
  EXPECT_EQ(s.batch(), 64);
  // No measurable signal (|G|^2 estimated <= 0): one growth, not a runaway.
  s.noise().load_state_dict(noise_state(10.0, -1.0));
  s.start_epoch(5, nullptr);
  EXPECT_EQ(s.batch(), 128);
}

TEST(BatchSchedule, NoiseRuleRespectsTheCapAndDecidesFromRankZerosFigures) {
  BatchSchedule s({.rule = "noise", .batch = 16, .growth = 2, .max = 32, .replicas = 1});
  s.noise().load_state_dict(noise_state(1.0, 1.0));  // this rank alone would not grow
  auto rank0 = [](std::vector<double>& v) { v = {1e6, 1.0, 5.0}; };
  s.start_epoch(1, rank0);
  EXPECT_EQ(s.batch(), 32);  // grown as rank 0 saw it
  s.noise().load_state_dict(noise_state(1.0, 1.0));
  s.start_epoch(2, rank0);
  EXPECT_EQ(s.batch(), 32);  // the cap
}

TEST(BatchSchedule, StateCarriesAcrossAResume) {
  BatchSchedule a({.rule = "noise", .batch = 16, .replicas = 1});
  a.noise().load_state_dict(noise_state(1000.0, 1.0));
  a.start_epoch(1, nullptr);
  a.count(160);
  const nlohmann::json state = a.state_dict();
  BatchSchedule b({.rule = "noise", .batch = 16, .replicas = 1});
  b.load_state_dict(state);
  EXPECT_EQ(b.batch(), a.batch());
  EXPECT_EQ(b.schedule_step(), 10);
  EXPECT_EQ(b.start_epoch(1, nullptr), "");  // the resumed epoch keeps its batch
  EXPECT_EQ(b.batch(), a.batch());
}

// Three ranks' loaders, the batch growing each epoch: every epoch the ranks
// read disjoint shards that together cover the dataset, in batches of the
// schedule's size.
TEST(BatchSchedule, RanksStreamsStayDisjointAndCompleteWhileTheBatchGrows) {
  class Index final : public data::Dataset {
   public:
    int64_t size() const override { return 99; }
    data::ExampleSpec spec() const override { return {{}, DType::i64, {}, DType::i64}; }
    void read(int64_t i, std::byte* input, std::byte* target) const override {
      std::memcpy(input, &i, 8);
      std::memcpy(target, &i, 8);
    }
  };
  auto dataset = std::make_shared<Index>();
  const int world = 3;
  std::vector<std::unique_ptr<data::Loader>> loaders;
  std::vector<BatchSchedule> schedules;
  for (int r = 0; r < world; ++r) {
    loaders.push_back(std::make_unique<data::Loader>(
        dataset,
        std::make_shared<data::DistributedSampler>(99, data::DistributedSamplerOptions{.rank = r, .world = world,
                                                                                      .seed = 7}),
        data::LoaderOptions{.batch_size = 4, .workers = r % 2}));
    schedules.push_back(BatchSchedule({.rule = "epoch", .batch = 4, .growth = 2, .replicas = world}));
  }
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    std::multiset<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      schedules[r].start_epoch(epoch, nullptr);
      loaders[r]->set_batch_size(schedules[r].batch());
      loaders[r]->start_epoch(epoch);
      int64_t batches = 0;
      while (auto b = loaders[r]->next()) {
        EXPECT_LE(b->size(), int64_t{4} << epoch);
        if (batches + 1 < loaders[r]->batches_per_epoch()) {
          EXPECT_EQ(b->size(), int64_t{4} << epoch);
        }
        for (int64_t i : b->input.to_vector<int64_t>()) seen.insert(i);
        ++batches;
      }
      EXPECT_EQ(batches, (33 + (4 << epoch) - 1) / (4 << epoch));
    }
    EXPECT_EQ(seen.size(), 99u) << "epoch " << epoch;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 99u) << "a rank read another's example";
  }
}

}  // namespace
}  // namespace braid::train
