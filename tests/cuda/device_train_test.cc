// Training on a device end to end: Module::to, optimizers whose state lives
// beside the parameters (SGD and Adam update through the device's ops; RMSProp
// and LAMB stage through the host), gradient clipping, checkpoints written
// from device tensors and loaded back onto the device, and a run configured
// with train.device through make_training_run. Each run on cuda:0 is compared
// with the same run on the CPU. In braid_cuda_emulated_test the device is
// emulated (host loops over host memory); in braid_cuda_test it is the GPU,
// and every test skips where there is none.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"
#include "braid/optim/adam.h"
#include "braid/optim/clip.h"
#include "braid/optim/lamb.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/sgd.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "braid/train/checkpoint.h"
#include "braid/train/config.h"
#include "braid/train/schema.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/blobs.h"

namespace braid {
namespace {

using testing::kGpu;

using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// 4 -> 16 -> 3, the same weights for the same seed (initialised on the host).
std::shared_ptr<nn::Sequential> mlp(uint64_t seed = 11) {
  Generator gen(seed);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 3, gen)});
}

// Batch i of 32 examples from the blobs, on the host.
std::pair<Tensor, Tensor> batch(int64_t i) {
  static const train::testing::Blobs blobs(320, 3);
  Tensor x = Tensor::empty({32, 4});
  Tensor y = Tensor::empty({32}, DType::i64);
  for (int64_t k = 0; k < 32; ++k) {
    blobs.read((i * 32 + k) % blobs.size(), static_cast<std::byte*>(x.raw_data()) + k * 16,
               static_cast<std::byte*>(y.raw_data()) + k * 8);
  }
  return {x, y};
}

struct Trained {
  std::vector<double> losses;
  nn::NamedTensors params;  // on the host
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// `steps` steps of forward, backward, clip and update on `device`.
Trained train_on(Device device, const OptimizerFactory& make, int steps, double clip = 0) {
  Trained r;
  r.model = mlp();
  r.model->to(device);
  r.optimizer = make(r.model->parameters());
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(s);
    r.optimizer->zero_grad();
    const Tensor loss = nn::cross_entropy_loss(r.model->forward(x.to(device)), y.to(device));
    EXPECT_EQ(loss.device(), device);
    backward(loss);
    if (clip > 0) optim::clip_grad_norm(r.optimizer->params(), clip);
    r.optimizer->step();
    r.losses.push_back(loss.item());
  }
  for (const auto& [n, t] : r.model->named_parameters()) r.params.emplace_back(n, t.to(Device::cpu));
  return r;
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) {
    ASSERT_NEAR(va[i], vb[i], tol * (1 + std::abs(vb[i]))) << what << " element " << i;
  }
}

void expect_same_run(const Trained& gpu, const Trained& cpu, double tol) {
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t s = 0; s < cpu.losses.size(); ++s) {
    EXPECT_NEAR(gpu.losses[s], cpu.losses[s], tol * (1 + std::abs(cpu.losses[s]))) << "loss of step " << s;
  }
  ASSERT_EQ(gpu.params.size(), cpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    expect_close(gpu.params[i].second, cpu.params[i].second, tol, cpu.params[i].first);
  }
}

const OptimizerFactory kSgd = [](std::vector<Tensor> p) {
  return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
};
const OptimizerFactory kAdam = [](std::vector<Tensor> p) {
  return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-4});
};

TEST(DeviceTrain, ModuleToKeepsTheHandlesAndRoundTrips) {
  BRAID_REQUIRE_GPU();
  Generator gen(5);
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, gen), std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::Linear>(8, 2, gen)});
  const nn::NamedTensors before = model->state_dict();  // the handles others (an optimizer) would hold
  std::vector<Tensor> values;
  for (const auto& [n, t] : before) values.push_back(t.clone());
  before.front().second.set_grad(Tensor::full(before.front().second.shape(), 0.5));
  EXPECT_EQ(model->device(), Device::cpu);

  EXPECT_EQ(&model->to(kGpu), model.get());
  EXPECT_EQ(model->device(), kGpu);
  const nn::NamedTensors after = model->state_dict();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(after[i].second.same(before[i].second)) << before[i].first;  // the same tensor, moved
    EXPECT_EQ(before[i].second.device(), kGpu) << before[i].first;            // buffers too
    expect_close(before[i].second, values[i], 0, before[i].first);
  }
  EXPECT_TRUE(before.front().second.requires_grad());
  EXPECT_EQ(before.front().second.grad().device(), kGpu);  // the gradient went along
  expect_close(before.front().second.grad(), Tensor::full(before.front().second.shape(), 0.5), 0, "grad");

  model->to(Device::cpu);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].second.device(), Device::cpu);
    expect_close(before[i].second, values[i], 0, before[i].first);
  }
}

TEST(DeviceTrain, SgdWithMomentumMatchesTheCpu) {
  BRAID_REQUIRE_GPU();
  const Trained cpu = train_on(Device::cpu, kSgd, 6);
  const Trained gpu = train_on(kGpu, kSgd, 6);
  expect_same_run(gpu, cpu, 1e-4);
  EXPECT_LT(cpu.losses.back(), cpu.losses.front());  // it learns at all
}

TEST(DeviceTrain, AdamWithClippingMatchesTheCpu) {
  BRAID_REQUIRE_GPU();
  const Trained cpu = train_on(Device::cpu, kAdam, 6, /*clip=*/0.5);
  const Trained gpu = train_on(kGpu, kAdam, 6, /*clip=*/0.5);
  expect_same_run(gpu, cpu, 1e-4);
}

// RMSProp and LAMB update with their own host loops: on a device they stage
// the tensors through the host, and must still match.
TEST(DeviceTrain, HostLoopOptimizersMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  const OptimizerFactory rmsprop = [](std::vector<Tensor> p) {
    return std::make_unique<optim::RMSProp>(std::move(p), optim::RMSPropOptions{.lr = 1e-2, .momentum = 0.5,
                                                                               .centered = true});
  };
  const OptimizerFactory lamb = [](std::vector<Tensor> p) {
    return std::make_unique<optim::LAMB>(std::move(p), optim::LAMBOptions{.lr = 1e-2, .weight_decay = 1e-2});
  };
  for (const OptimizerFactory& make : {rmsprop, lamb}) {
    const Trained cpu = train_on(Device::cpu, make, 4);
    const Trained gpu = train_on(kGpu, make, 4);
    SCOPED_TRACE(cpu.optimizer->name());
    expect_same_run(gpu, cpu, 1e-4);
    for (const auto& [n, t] : gpu.optimizer->state_dict().tensors) EXPECT_EQ(t.device(), kGpu) << n;
  }
}

TEST(DeviceTrain, OptimizerStateLivesOnTheDevice) {
  BRAID_REQUIRE_GPU();
  for (const OptimizerFactory& make : {kSgd, kAdam}) {
    const Trained gpu = train_on(kGpu, make, 2);
    const Trained cpu = train_on(Device::cpu, make, 2);
    SCOPED_TRACE(cpu.optimizer->name());
    const optim::OptimizerState gs = gpu.optimizer->state_dict(), cs = cpu.optimizer->state_dict();
    ASSERT_EQ(gs.tensors.size(), cs.tensors.size());
    ASSERT_FALSE(gs.tensors.empty());  // momentum, exp_avg, exp_avg_sq
    for (size_t i = 0; i < gs.tensors.size(); ++i) {
      EXPECT_EQ(gs.tensors[i].first, cs.tensors[i].first);
      EXPECT_EQ(gs.tensors[i].second.device(), kGpu) << gs.tensors[i].first;
      expect_close(gs.tensors[i].second, cs.tensors[i].second, 1e-4, gs.tensors[i].first);
    }
    EXPECT_EQ(gs.scalars, cs.scalars);
  }
}

TEST(DeviceTrain, CheckpointFromTheDeviceLoadsBackOntoIt) {
  BRAID_REQUIRE_GPU();
  test::TempDir dir;
  Trained a = train_on(kGpu, kAdam, 3);
  train::Checkpoint saved;
  saved.model = a.model->state_dict();
  saved.optimizer = a.optimizer->state_dict();
  saved.step = 3;
  train::save_checkpoint(dir.str(), saved);

  const train::Checkpoint loaded = train::load_checkpoint(train::checkpoint_stem(dir.str(), 3));
  for (const auto& [n, t] : loaded.model) EXPECT_EQ(t.device(), Device::cpu) << n;  // files hold host tensors
  auto model = mlp(/*seed=*/99);  // other weights, replaced by the checkpoint's
  model->to(kGpu);
  auto opt = kAdam(model->parameters());
  model->load_state_dict(loaded.model);
  opt->load_state_dict(loaded.optimizer);
  for (const auto& [n, t] : model->state_dict()) EXPECT_EQ(t.device(), kGpu) << n;
  for (const auto& [n, t] : opt->state_dict().tensors) EXPECT_EQ(t.device(), kGpu) << n;
  for (size_t i = 0; i < a.params.size(); ++i) {
    expect_close(model->named_parameters()[i].second, a.params[i].second, 0, a.params[i].first);
  }

  // One more step from each: the restored run continues exactly.
  auto step = [](nn::Module& m, optim::Optimizer& o) {
    auto [x, y] = batch(3);
    o.zero_grad();
    const Tensor loss = nn::cross_entropy_loss(m.forward(x.to(kGpu)), y.to(kGpu));
    backward(loss);
    o.step();
    return loss.item();
  };
  const double restored = step(*model, *opt), original = step(*a.model, *a.optimizer);
  EXPECT_NEAR(restored, original, 1e-6 * (1 + std::abs(original)));
  for (size_t i = 0; i < a.params.size(); ++i) {
    expect_close(model->named_parameters()[i].second, a.model->named_parameters()[i].second, 1e-6, a.params[i].first);
  }
}

TEST(DeviceTrain, CausalAttentionMatchesTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(3);
  nn::MultiHeadAttention cpu(8, 2, gen), gpu(8, 2, gen);
  gpu.load_state_dict(cpu.state_dict());
  gpu.to(kGpu);
  Tensor x = Tensor::empty({2, 5, 8});
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>(gen.normal());
  const Tensor y = gpu.forward(x.to(kGpu));  // the causal mask is made beside the scores
  EXPECT_EQ(y.device(), kGpu);
  expect_close(y, cpu.forward(x), 1e-4, "attention output");
}

// A CSV of `rows` blob examples (4 features, 3 classes) for braid train.
std::string write_csv(const test::TempDir& dir, int64_t rows) {
  const train::testing::Blobs blobs(rows, 4);
  const std::string path = dir.file("blobs.csv");
  std::ofstream out(path);
  for (int64_t i = 0; i < rows; ++i) {
    float x[4];
    int64_t y = 0;
    blobs.read(i, reinterpret_cast<std::byte*>(x), reinterpret_cast<std::byte*>(&y));
    out << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << "," << y << "\n";
  }
  return path;
}

train::Config device_config(const test::TempDir& dir, const std::string& device, const std::string& optimizer) {
  train::Config c(train::braid_schema());
  c.set("data.name=csv");
  c.set_text("data.path", write_csv(dir, 200), "test");
  c.set("data.workers=0");
  c.set("model.name=mlp");
  c.set("model.hidden=16");
  c.set("optim.name=" + optimizer);
  c.set("optim.lr=0.05");
  c.set("train.batch_size=16");
  c.set("train.epochs=1");
  c.set("train.max_steps=4");
  c.set("train.checkpoint_every=2");
  c.set("train.grad_clip=1.0");
  c.set("train.progress=off");
  c.set("train.threads=1");
  c.set("parallel.strategy=none");
  c.set_text("train.out_dir", dir.file("run-" + device), "test");
  c.set_text("train.device", device, "test");
  return c;
}

TEST(DeviceTrain, ConfiguredRunTrainsOnTheDevice) {
  BRAID_REQUIRE_GPU();
  test::TempDir dir;
  EXPECT_EQ(train::train_device(device_config(dir, "cuda", "sgd")), kGpu);
  EXPECT_THROW(train::train_device(device_config(dir, "cuda:99", "sgd")), ConfigError);

  train::TrainingRun gpu = train::make_training_run(device_config(dir, "cuda", "adam"));
  EXPECT_EQ(gpu.trainer->device(), kGpu);
  for (const auto& [n, t] : gpu.model->state_dict()) EXPECT_EQ(t.device(), kGpu) << n;
  const train::TrainSummary gs = gpu.trainer->fit();
  train::TrainingRun cpu = train::make_training_run(device_config(dir, "cpu", "adam"));
  const train::TrainSummary cs = cpu.trainer->fit();

  EXPECT_EQ(gs.steps, 4);
  EXPECT_TRUE(std::isfinite(gs.final_loss));
  EXPECT_NEAR(gs.final_loss, cs.final_loss, 1e-4 * (1 + std::abs(cs.final_loss)));
  ASSERT_TRUE(gs.has_eval);  // evaluation on the device: the same figures
  EXPECT_NEAR(gs.last_eval.loss, cs.last_eval.loss, 1e-4 * (1 + std::abs(cs.last_eval.loss)));
  EXPECT_DOUBLE_EQ(gs.last_eval.top1, cs.last_eval.top1);
  for (const auto& [n, t] : gpu.trainer->optimizer().state_dict().tensors) EXPECT_EQ(t.device(), kGpu) << n;

  // The last checkpoint holds host tensors equal to the device's weights, and
  // a resumed run loads them back onto the device.
  ASSERT_FALSE(gs.last_checkpoint.empty());
  const train::Checkpoint ck = train::load_checkpoint(gs.last_checkpoint);
  const std::map<std::string, Tensor> saved(ck.model.begin(), ck.model.end());
  const nn::NamedTensors weights = gpu.model->state_dict();
  ASSERT_EQ(saved.size(), weights.size());
  for (const auto& [n, t] : weights) {
    ASSERT_TRUE(saved.count(n)) << n;
    EXPECT_EQ(saved.at(n).device(), Device::cpu) << n;
    expect_close(t, saved.at(n), 0, n);
  }
  train::Config again = device_config(dir, "cuda", "adam");
  again.set_text("train.out_dir", dir.file("run-cuda"), "test");
  again.set("train.resume=always");
  again.set("train.max_steps=5");
  train::TrainingRun resumed = train::make_training_run(again);
  const train::TrainSummary rs = resumed.trainer->fit();
  EXPECT_EQ(rs.steps, 5);
  for (const auto& [n, t] : resumed.trainer->optimizer().state_dict().tensors) EXPECT_EQ(t.device(), kGpu) << n;
}

TEST(DeviceTrain, F16WithLossScalingFollowsTheF32Run) {
  BRAID_REQUIRE_GPU();
  test::TempDir dir;
  train::Config f16 = device_config(dir, "cuda", "adam");
  f16.set("train.precision=f16");
  f16.set_text("train.out_dir", dir.file("run-f16"), "test");
  const train::TrainSummary half = train::make_training_run(f16).trainer->fit();
  const train::TrainSummary full = train::make_training_run(device_config(dir, "cuda", "adam")).trainer->fit();
  EXPECT_EQ(half.steps, full.steps);
  EXPECT_NEAR(half.final_loss, full.final_loss, 2e-2 * (1 + std::abs(full.final_loss)));
  // The scale travels with the checkpoint (65536 until an overflow halves it).
  const train::Checkpoint ck = train::load_checkpoint(half.last_checkpoint);
  ASSERT_TRUE(ck.extra.contains("loss_scaler"));
  EXPECT_GT(ck.extra["loss_scaler"]["scale"].get<double>(), 0);

  train::Config cpu = device_config(dir, "cpu", "adam");
  cpu.set("train.precision=f16");
  EXPECT_THROW(train::make_training_run(cpu), Error);  // f16 products need a GPU
}

}  // namespace
}  // namespace braid
