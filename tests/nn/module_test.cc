// Module bookkeeping (names, state_dict, modes) and the layers built on it.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/conv.h"
#include "braid/nn/dropout.h"
#include "braid/nn/init.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/weight_norm.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "tests/ops/torch_oracle.h"

namespace braid::nn {
namespace {

std::shared_ptr<Sequential> small_cnn(Generator& gen) {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 4, std::array<int64_t, 2>{3, 3}, gen), std::make_shared<BatchNorm2d>(4),
      std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(Pool2dOptions{}), std::make_shared<Flatten>(),
      std::make_shared<Linear>(4 * 3 * 3, 5, gen)});
}

TEST(Module, NamesFollowTorchSequential) {
  Generator gen(1);
  auto m = small_cnn(gen);
  std::vector<std::string> names;
  for (auto& [n, t] : m->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "5.weight", "5.bias"}));
  std::vector<std::string> bufs;
  for (auto& [n, t] : m->named_buffers()) bufs.push_back(n);
  EXPECT_EQ(bufs, (std::vector<std::string>{"1.running_mean", "1.running_var"}));
  EXPECT_EQ(m->num_parameters(), 4 * 9 + 4 + 4 + 4 + 36 * 5 + 5);
  for (const Tensor& p : m->parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(Module, StateDictRoundTripAndErrors) {
  Generator g1(1), g2(2);
  auto a = small_cnn(g1), b = small_cnn(g2);
  const Tensor w_handle = b->parameters()[0];
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(w_handle.to_vector<float>(), a->parameters()[0].to_vector<float>());  // copied in place
  NamedTensors bad = a->state_dict();
  bad[0].second = Tensor::zeros({1});
  const auto before = b->parameters()[1].to_vector<float>();
  try {
    b->load_state_dict(bad);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("0.weight"), std::string::npos) << e.what();
  }
  NamedTensors missing = a->state_dict();
  missing.pop_back();
  EXPECT_THROW(b->load_state_dict(missing), ValueError);
  b->load_state_dict(missing, /*strict=*/false);
  NamedTensors extra = a->state_dict();
  extra.emplace_back("9.weight", Tensor::zeros({1}));
  EXPECT_THROW(b->load_state_dict(extra), ValueError);
}

TEST(Module, TrainEvalReachesChildren) {
  Generator gen(1);
  auto m = small_cnn(gen);
  m->eval();
  EXPECT_FALSE((*m)[1].is_training());
  m->train();
  EXPECT_TRUE((*m)[1].is_training());
}

TEST(Layers, InitBoundsAndDeterminism) {
  Generator g1(7), g2(7);
  Linear a(100, 50, g1), b(100, 50, g2);
  EXPECT_EQ(a.weight().to_vector<float>(), b.weight().to_vector<float>());  // same seed, same weights
  double mx = 0;
  for (float v : a.weight().to_vector<float>()) mx = std::max(mx, std::abs(static_cast<double>(v)));
  EXPECT_LE(mx, 0.1);  // U(-1/sqrt(100), 1/sqrt(100))
  EXPECT_GT(mx, 0.09);
  Tensor w = Tensor::empty({64, 32, 3, 3});
  init::kaiming_normal_(w, g1);
  double sq = 0;
  for (float v : w.to_vector<float>()) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(w.numel())), std::sqrt(2.0 / (32 * 9)), 0.01);
  init::xavier_uniform_(w, g1);
  for (float v : w.to_vector<float>()) ASSERT_LE(std::abs(v), std::sqrt(6.0 / (32 * 9 + 64 * 9)) + 1e-7);
}

TEST(Layers, DropoutOnlyInTraining) {
  Generator gen(3);
  Dropout d(0.5, &gen);
  Tensor x = Tensor::ones({1000});
  const auto y = d.forward(x).to_vector<float>();
  int zeros = 0;
  for (float v : y) {
    zeros += v == 0;
    ASSERT_TRUE(v == 0 || v == 2.0f);
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  d.eval();
  EXPECT_EQ(d.forward(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(Dropout(1.0), ValueError);
}

TEST(Layers, BatchNormTracksRunningStatistics) {
  BatchNorm2d bn(2);
  Generator gen(5);
  Tensor x = Tensor::empty({8, 2, 3, 3});
  init::normal_(x, 3.0, 1.0, gen);
  bn.forward(x);
  const auto rm = bn.named_buffers()[0].second.to_vector<float>();
  EXPECT_NEAR(rm[0], 0.3, 0.05);  // 0.9 * 0 + 0.1 * ~3
  bn.eval();
  const Tensor y = bn.forward(x);  // running stats: output not centred
  EXPECT_GT(mean(y).item(), 1.0);
}

TEST(Layers, GhostBatchNormIsBatchNormPerRunOfExamples) {
  Generator gen(6);
  Tensor x = Tensor::empty({10, 2, 3, 3});
  init::normal_(x, 3.0, 2.0, gen);
  // One ghost batch as large as the batch: plain batch norm.
  BatchNorm2d plain(2), one_ghost(2, {.ghost_batch = 10});
  EXPECT_EQ(one_ghost.forward(x).to_vector<float>(), plain.forward(x).to_vector<float>());
  EXPECT_EQ(one_ghost.named_buffers()[1].second.to_vector<float>(), plain.named_buffers()[1].second.to_vector<float>());
  // Runs of 4, 4, 2: each normalised alone, each updating the running statistics in turn.
  BatchNorm2d ghost(2, {.ghost_batch = 4}), reference(2);
  const auto y = ghost.forward(x).to_vector<float>();
  std::vector<float> want;
  for (int64_t b = 0; b < 10; b += 4) {
    const auto part = reference.forward(slice(x, 0, b, std::min<int64_t>(10, b + 4)).contiguous()).to_vector<float>();
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(y, want);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ghost.named_buffers()[i].second.to_vector<float>(), reference.named_buffers()[i].second.to_vector<float>());
  }
  // In eval mode there are no ghosts: the running statistics, as plain batch norm.
  ghost.eval();
  reference.eval();
  EXPECT_EQ(ghost.forward(x).to_vector<float>(), reference.forward(x).to_vector<float>());
  EXPECT_THROW(BatchNorm2d(2, {.ghost_batch = -1}), ValueError);
}

TEST(Layers, WeightNormStartsAtTheLayerAndLearnsLengthAndDirection) {
  Generator gen(8);
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 2, std::array<int64_t, 2>{3, 3}, gen), std::make_shared<ReLU>(),
      std::make_shared<Flatten>(), std::make_shared<Linear>(8, 3, gen)});
  Tensor x = Tensor::empty({4, 1, 4, 4});
  init::normal_(x, 0, 1, gen);
  const auto before = model->forward(x).to_vector<float>();
  EXPECT_EQ(apply_weight_norm(*model), 2);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  // torch.nn.utils.weight_norm's names, so state dicts line up.
  EXPECT_EQ(names, (std::vector<std::string>{"0.bias", "0.weight_g", "0.weight_v", "3.bias", "3.weight_g", "3.weight_v"}));
  EXPECT_EQ(model->named_parameters()[1].second.shape(), (Shape{2, 1, 1, 1}));
  EXPECT_EQ(model->named_parameters()[4].second.shape(), (Shape{3, 1}));
  const Tensor y = model->forward(x);
  const auto after = y.to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(after[i], before[i], 1e-5);
  autograd::backward(sum(y));
  for (const Tensor& p : model->parameters()) EXPECT_TRUE(p.grad().defined());
  // Scaling v leaves the layer unchanged: only its direction counts.
  const Tensor v = model->named_parameters()[5].second;
  v.copy_from(mul(v, 3.0));
  const auto scaled = model->forward(x).to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(scaled[i], before[i], 1e-5);
}

// Position t of a causal block must not depend on tokens after t.
TEST(Layers, TransformerBlockIsCausalAndDifferentiable) {
  Generator gen(9);
  TransformerBlock block(16, 4, gen);
  Tensor x = Tensor::empty({2, 5, 16});
  init::normal_(x, 0, 1, gen);
  const auto y1 = block.forward(x).to_vector<float>();
  Tensor x2 = x.clone();
  x2.data<float>()[4 * 16 + 3] += 1.0f;  // batch 0, last position
  const auto y2 = block.forward(x2).to_vector<float>();
  // Positions 0..3 unchanged (up to GEMM summation order, which may differ per call).
  for (int i = 0; i < 4 * 16; ++i) ASSERT_NEAR(y1[i], y2[i], 1e-5) << i;
  EXPECT_GT(std::abs(y1[4 * 16] - y2[4 * 16]), 1e-3);
  Tensor loss = sum(block.forward(x));
  backward(loss);
  for (auto& [n, p] : block.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
}

TEST(Layers, AttentionMatchesPyTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(4);
  MultiHeadAttention mha(8, 2, gen);
  Tensor x = Tensor::empty({3, 5, 8});
  init::normal_(x, 0, 1, gen);
  const NamedTensors p = mha.named_parameters();  // in_proj.weight, in_proj.bias, out_proj.weight, out_proj.bias
  const std::string expr =
      "F.multi_head_attention_forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), 8, 2, wi, bi, None, "
      "None, False, 0.0, wo, bo, training=False, need_weights=False, "
      "attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))[0].transpose(0, 1)";
  auto ref = ::braid::testing::torch_eval(
      expr, {{"x", x}, {"wi", p[0].second}, {"bi", p[1].second}, {"wo", p[2].second}, {"bo", p[3].second}});
  EXPECT_TRUE(::braid::testing::all_close(mha.forward(x), ref.value(), 1e-4, 1e-5));
}

TEST(Layers, LossesFlattenLeadingDims) {
  Tensor logits = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 0, 0, 0, 1, 1, 1}, {2, 2, 3});
  Tensor targets = Tensor::from_vector<int64_t>({0, 1, 2, 2}, {2, 2});
  const double flat = cross_entropy_loss(logits, targets).item();
  double want = 0;
  const float* l = logits.data<float>();
  const int64_t* t = targets.data<int64_t>();
  for (int r = 0; r < 4; ++r) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(l[r * 3 + c]);
    want += std::log(z) - l[r * 3 + t[r]];
  }
  EXPECT_NEAR(flat, want / 4, 1e-5);
  EXPECT_THROW(loss_by_name("hinge"), ValueError);
  EXPECT_THROW(cross_entropy_loss(logits, Tensor::zeros({2}, DType::i64)), ValueError);
}

}  // namespace
}  // namespace braid::nn
