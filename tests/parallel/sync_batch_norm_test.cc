// Synchronised batch norm: N ranks with uneven slices of a batch must
// normalise, differentiate and track running statistics exactly as one
// process over the concatenated batch (F.batch_norm's semantics, which
// tests/ops/norm_test.cc checks against PyTorch); and a CNN with it trained
// under a data-parallel plan must follow one process with the global batch.
#include <gtest/gtest.h>

#include <mutex>

#include "braid/nn/conv.h"
#include "braid/nn/norm.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/sync_batch_norm.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

constexpr int64_t kChannels = 3;

Tensor normal(const Shape& shape, uint64_t seed, double mean = 0, double std = 1) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (float& x : v) x = static_cast<float>(mean + std * g.normal());
  return Tensor::from_vector(v, shape);
}

int64_t rows_of(int rank) { return rank + 2; }  // uneven slices: 2, 3, 4, 5
int64_t first_row(int rank) {
  int64_t at = 0;
  for (int r = 0; r < rank; ++r) at += rows_of(r);
  return at;
}

std::unique_ptr<nn::BatchNorm2d> layer() {
  auto bn = std::make_unique<nn::BatchNorm2d>(kChannels);
  for (const auto& [name, p] : bn->named_parameters()) p.copy_from(normal(p.shape(), name == "weight" ? 7 : 8));
  return bn;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
}

TEST(SyncBatchNorm, OverRanksEqualsBatchNormOverTheConcatenatedBatch) {
  for (int world = 1; world <= 4; ++world) {
    const int64_t total = first_row(world);
    const Tensor x_all = normal({total, kChannels, 4, 5}, 1, 2.0, 3.0);  // far from 0 and 1: the stats matter
    const Tensor c_all = normal({total, kChannels, 4, 5}, 2);          // loss = sum(y * c)
    // One process.
    auto whole = layer();
    Tensor x = x_all.clone();
    x.set_requires_grad();
    const Tensor y = whole->forward(x);
    autograd::backward(sum(mul(y, c_all)));
    const testing::Params whole_grads = {{"weight", whole->named_parameters()[0].second.grad().to_vector<float>()},
                                         {"bias", whole->named_parameters()[1].second.grad().to_vector<float>()}};
    // N ranks, each with its slice; the parameter gradients summed over ranks.
    std::mutex mu;
    testing::Params summed;
    testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
      auto bn = layer();
      EXPECT_EQ(synchronize_batch_norm(*bn, comm), 1);
      const int64_t b = first_row(rank), e = b + rows_of(rank);
      Tensor xr = slice(x_all, 0, b, e).contiguous();
      xr.set_requires_grad();
      const Tensor yr = bn->forward(xr);
      autograd::backward(sum(mul(yr, slice(c_all, 0, b, e))));
      const std::string where = fmt::format("world {} rank {}", world, rank);
      expect_near(yr.to_vector<float>(), slice(y, 0, b, e).contiguous().to_vector<float>(), 2e-5, where + " output");
      expect_near(xr.grad().to_vector<float>(), slice(x.grad(), 0, b, e).contiguous().to_vector<float>(), 2e-5,
                  where + " input gradient");
      for (size_t i = 0; i < 2; ++i) {
        expect_near(bn->named_buffers()[i].second.to_vector<float>(), whole->named_buffers()[i].second.to_vector<float>(),
                    1e-5, where + " " + bn->named_buffers()[i].first);
      }
      std::lock_guard lock(mu);
      for (const auto& [name, p] : bn->named_parameters()) {
        const auto g = p.grad().to_vector<float>();
        auto& acc = summed[name];
        acc.resize(g.size(), 0.0f);
        for (size_t i = 0; i < g.size(); ++i) acc[i] += g[i];
      }
    });
    for (const auto& [name, want] : whole_grads) expect_near(summed.at(name), want, 1e-4, fmt::format("world {} {}", world, name));
  }
}

TEST(SyncBatchNorm, GhostBatchesAreLocalAndRefuseSynchronisation) {
  nn::BatchNorm2d ghost(kChannels, {.ghost_batch = 4});
  testing::on_ranks(1, [&](int, comm::Communicator comm) {
    EXPECT_THROW(synchronize_batch_norm(ghost, comm), ConfigError);
  });
}

// conv -> batch norm -> relu -> linear, on [rows, 1, 4, 4] images.
std::shared_ptr<nn::Sequential> cnn_with_batch_norm(uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(1, kChannels, std::array<int64_t, 2>{3, 3}, gen));
  m->push_back(std::make_shared<nn::BatchNorm2d>(kChannels));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(kChannels * 2 * 2, 5, gen));
  return m;
}

std::pair<Tensor, Tensor> images(int64_t step, int64_t rows) {
  auto [x, t] = testing::batch(false, step, rows);  // [rows, 6] features, 5 classes
  const Tensor pixels = normal({rows, 1, 4, 4}, 900 + static_cast<uint64_t>(step), 1.0, 2.0);
  return {pixels, t};
}

TEST(SyncBatchNorm, DataParallelTrainingFollowsOneProcessWithTheGlobalBatch) {
  constexpr int kSteps = 4;
  constexpr int64_t kRows = 12;
  constexpr double kLr = 0.1;
  // One process.
  auto whole = cnn_with_batch_norm(3);
  for (int s = 0; s < kSteps; ++s) {
    auto [x, t] = images(s, kRows);
    autograd::backward(nn::cross_entropy_loss(whole->forward(x), t));
    testing::sgd(*whole, kLr);
  }
  const testing::Params want = testing::values(*whole);
  for (const std::string strategy : {"allreduce", "zero"}) {
    for (int world : {2, 3, 4}) {
      testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
        PlanOptions o{.strategy = strategy, .sync_batch_norm = true, .data_parallel = {.bucket_bytes = 64}};
        o.zero.stage = 2;
        PlannedModel pm = make_plan(o, comm, nullptr, cnn_with_batch_norm(3), nn::cross_entropy_loss);
        auto opt = std::make_unique<optim::SGD>(pm.plan->optimizer_parameters(*pm.model), optim::SGDOptions{.lr = kLr});
        pm.plan->setup(*pm.model, {}, opt.get());
        const int64_t per = kRows / world, first = per * rank;
        for (int s = 0; s < kSteps; ++s) {
          opt->zero_grad(false);
          auto [x, t] = images(s, kRows);
          pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per), slice(t, 0, first, first + per));
          pm.plan->finish_gradients();
          opt->step();
          pm.plan->after_step();
        }
        const testing::Params got = testing::values(*pm.model);
        for (const auto& [name, v] : got) {
          expect_near(v, want.at(name), 2e-5, fmt::format("{} N={} rank {} {}", strategy, world, rank, name));
        }
      });
    }
  }
  // Without synchronisation the replicas normalise with their own slices: the
  // same run differs, so the test above can fail.
  testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan({.strategy = "allreduce"}, comm, nullptr, cnn_with_batch_norm(3), nn::cross_entropy_loss);
    auto opt = std::make_unique<optim::SGD>(pm.plan->optimizer_parameters(*pm.model), optim::SGDOptions{.lr = kLr});
    pm.plan->setup(*pm.model, {}, opt.get());
    for (int s = 0; s < kSteps; ++s) {
      opt->zero_grad(false);
      auto [x, t] = images(s, kRows);
      pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, 6 * rank, 6 * rank + 6), slice(t, 0, 6 * rank, 6 * rank + 6));
      pm.plan->finish_gradients();
      opt->step();
      pm.plan->after_step();
    }
    double diff = 0;
    for (const auto& [name, v] : testing::values(*pm.model)) {
      for (size_t i = 0; i < v.size(); ++i) diff = std::max(diff, std::abs(double(v[i]) - want.at(name)[i]));
    }
    EXPECT_GT(diff, 1e-3);
  });
}

TEST(SyncBatchNorm, ParameterServersRefuseIt) {
  EXPECT_THROW(make_plan({.strategy = "ps", .sync_batch_norm = true}, comm::Communicator(), nullptr,
                         cnn_with_batch_norm(1), nn::cross_entropy_loss),
               ConfigError);
}

}  // namespace
}  // namespace braid::parallel
