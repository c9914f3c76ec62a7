// model.name = resnet through the trainer: the config keys build the network
// torchvision would, Fashion-MNIST trains through make_training_run (what
// `braid train` runs), and two data-parallel ranks with synchronised batch
// norm take the same steps as one process on the whole batch.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/data/open.h"
#include "braid/models/resnet.h"
#include "braid/nn/init.h"
#include "braid/nn/loss.h"
#include "braid/ops/shape.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/checkpoint.h"
#include "braid/train/models.h"
#include "braid/train/schema.h"
#include "braid/train/trainer_setup.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

Config resnet_config(const std::vector<std::string>& sets) {
  Config c(braid_schema());
  for (const char* kv : {"model.name=resnet", "model.norm=batch", "model.stem=small", "train.threads=1",
                         "data.workers=0", "train.progress=off", "train.eval_every=0"}) {
    c.set(kv);
  }
  for (const auto& kv : sets) c.set(kv);
  return c;
}

TEST(ResNetTrain, KeysBuildTheFamily) {
  Generator gen(1);
  const ModelInfo fashion{.input_shape = {1, 28, 28}, .classes = 10};
  const Config c50 = resnet_config({"model.depth=50", "model.stem=imagenet", "model.zero_init_residual=true"});
  auto m = build_model(c50, ModelInfo{.input_shape = {3, 224, 224}, .classes = 1000}, gen);
  EXPECT_EQ(m->num_parameters(), 25557032);  // torchvision's resnet50
  for (const auto& [n, t] : m->named_parameters()) {
    if (n == "layer1.0.bn3.weight") {
      EXPECT_EQ(t.to_vector<float>(), std::vector<float>(256, 0.0f));
    }
  }
  // Small stem, one channel: conv1 is [64, 1, 3, 3].
  auto small = build_model(resnet_config({}), fashion, gen);
  EXPECT_EQ(small->named_parameters()[0].first, "conv1.weight");
  EXPECT_EQ(small->named_parameters()[0].second.shape(), (Shape{64, 1, 3, 3}));

  auto refused = [&](const std::vector<std::string>& sets, const ModelInfo& info) {
    return test::message_of<ConfigError>([&] { build_model(resnet_config(sets), info, gen); });
  };
  EXPECT_NE(refused({"model.depth=20"}, fashion).find("model.depth = 20"), std::string::npos);
  EXPECT_NE(refused({"model.norm=none"}, fashion).find("model.norm = batch"), std::string::npos);
  EXPECT_NE(refused({"model.norm=weight"}, fashion).find("model.norm"), std::string::npos);
  EXPECT_NE(refused({}, ModelInfo{.input_shape = {784}, .classes = 10}).find("image inputs"), std::string::npos);
  // Batch norm keys still belong to the convolutional families only.
  Config mlp = resnet_config({"model.name=mlp"});
  EXPECT_NE(test::message_of<ConfigError>([&] { build_model(mlp, fashion, gen); }).find("cnn or resnet"),
            std::string::npos);
}

class Losses final : public Callback {
 public:
  void on_log(const StepMetrics& m) override { losses.push_back(m.loss); }
  std::vector<double> losses;
};

// ResNet-18 (small stem) through make_training_run, what `braid train`
// runs, on the first 32 Fashion-MNIST images: 12 steps of 16 memorise them.
// (On fresh batches the first steps of a ResNet are too noisy to test: PyTorch's
// losses rise and fall between 2.0 and 2.9 over its first 10 at this size.)
TEST(ResNetTrain, FashionMnistLossFalls) {
  test::TempDir dir;
  const Config c = resnet_config({"train.max_steps=12", "train.epochs=100", "train.batch_size=16", "optim.name=sgd",
                                  "optim.lr=0.02",
                                  "optim.momentum=0.9", "train.log_every=1", "train.out_dir=" + dir.str()});
  TrainingRun run = make_training_run(
      c, {.train_data = [](std::shared_ptr<const data::Dataset> d) -> std::shared_ptr<const data::Dataset> {
            return std::make_shared<data::Subset>(std::move(d), 0, 32);
          }});
  c.refuse_unread("braid train");
  auto rec = std::make_shared<Losses>();
  run.trainer->add_callback(rec);
  EXPECT_EQ(run.trainer->fit().steps, 12);
  ASSERT_EQ(rec->losses.size(), 12u);
  for (double l : rec->losses) ASSERT_TRUE(std::isfinite(l));
  const double last = (rec->losses[10] + rec->losses[11]) / 2;
  EXPECT_LT(last, 0.6 * rec->losses[0]) << "first " << rec->losses[0] << ", last two " << last;
  // The checkpoint holds torchvision's names.
  const Checkpoint ckpt = load_checkpoint(checkpoint_stem(dir.str(), 12));
  Generator gen(0);
  auto fresh = models::resnet({.classes = 10, .in_channels = 1, .stem = models::ResNetStem::small}, gen);
  fresh->load_state_dict(ckpt.model);
  EXPECT_EQ(models::to_torchvision(*fresh).size(), ckpt.model.size() + 20);
}

// Two ranks, each half of a batch of 8, batch norm synchronised over them:
// the same statistics, loss and gradients as one process on all 8. In f64:
// in f32 the order of the sums (the all-reduce's, each convolution's) moves
// relu kinks and with them single gradients by more than 1e-4 of their
// tensor's largest. (braid's optimizers take f32 only, so the step stops at
// the combined gradients.)
TEST(ResNetTrain, SyncBatchNormOverTwoRanksEqualsOneProcess) {
  const models::ResNetConfig rc{.depth = 18, .classes = 10, .in_channels = 1, .stem = models::ResNetStem::small};
  Generator data_gen(3);
  Tensor x = Tensor::empty({8, 1, 12, 12}), y = Tensor::empty({8}, DType::i64);
  nn::init::normal_(x, 0, 1, data_gen);
  x = x.to(DType::f64);
  for (int64_t i = 0; i < 8; ++i) static_cast<int64_t*>(y.raw_data())[i] = (i * 3) % 10;

  struct Result {
    double loss = 0;
    nn::NamedTensors grads, buffers;
  };
  auto result_of = [](nn::Module& m, double loss) {
    Result r{loss, {}, m.named_buffers()};
    for (const auto& [n, p] : m.named_parameters()) r.grads.emplace_back(n, p.grad());
    return r;
  };
  const Result one = [&] {
    Generator gen(9);
    std::shared_ptr<nn::Module> m = models::resnet(rc, gen);
    m->to(DType::f64);
    parallel::Plan plan;
    plan.setup(*m, {});
    const double loss = plan.forward_backward(*m, nn::cross_entropy_loss, x, y);
    plan.finish_gradients();
    return result_of(*m, loss);
  }();

  std::vector<Result> ranks(2);
  parallel::testing::on_ranks(2, [&](int r, comm::Communicator comm) {
    Generator gen(9);
    std::shared_ptr<nn::Module> m = models::resnet(rc, gen);
    m->to(DType::f64);
    parallel::PlannedModel p = parallel::make_plan({.strategy = "allreduce", .sync_batch_norm = true}, comm, nullptr,
                                                   m, nn::cross_entropy_loss);
    p.plan->setup(*p.model, {});
    const Tensor xr = slice(x, 0, 4 * r, 4 * r + 4).contiguous(), yr = slice(y, 0, 4 * r, 4 * r + 4).contiguous();
    const double loss = p.plan->forward_backward(*p.model, p.loss, xr, yr);
    p.plan->finish_gradients();
    ranks[r] = result_of(*p.model, loss);
  });
  // Each rank's loss is its half's mean; the gradients are averaged over the ranks.
  EXPECT_NEAR((ranks[0].loss + ranks[1].loss) / 2, one.loss, 1e-12 * std::abs(one.loss));
  auto expect_equal = [](const nn::NamedTensors& a, const nn::NamedTensors& b, int rank) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].first, b[i].first);
      ASSERT_TRUE(b[i].second.defined()) << b[i].first << " on rank " << rank;
      const std::vector<double> va = a[i].second.to_vector<double>(), vb = b[i].second.to_vector<double>();
      double scale = 0;
      for (double v : va) scale = std::max(scale, std::abs(v));
      for (size_t k = 0; k < va.size(); ++k) {
        ASSERT_NEAR(va[k], vb[k], 1e-9 * (scale + 1e-6)) << a[i].first << "[" << k << "] on rank " << rank;
      }
    }
  };
  for (int r = 0; r < 2; ++r) {
    expect_equal(one.grads, ranks[r].grads, r);
    expect_equal(one.buffers, ranks[r].buffers, r);  // running statistics of the whole batch
  }
}

}  // namespace
}  // namespace braid::train
