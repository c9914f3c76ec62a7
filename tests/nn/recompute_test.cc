// Activation recompute (nn/recompute.h): checkpoint and rematerialised
// outputs give the gradients of the plain forward bit for bit, with dropout
// on, and hold less memory between forward and backward.
#include <gtest/gtest.h>

#include <map>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/nn/attention.h"
#include "braid/nn/recompute.h"
#include "braid/nn/sequential.h"
#include "braid/ops/activation.h"
#include "braid/ops/dropout.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/tensor/allocator.h"
#include "braid/tensor/cpu/autotune.h"

namespace braid::nn {
namespace {

// Kernels pinned: a tuner still trying candidates would give a recomputed
// product another kernel than the first run's.
struct Deterministic {
  Deterministic() { cpu::set_deterministic_kernels(true); }
  ~Deterministic() { cpu::set_deterministic_kernels(false); }
};

Tensor random(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(g.normal());
  return t;
}

// A few layers of GPT-2's block with dropout on, sharing one generator.
std::shared_ptr<Sequential> blocks(Generator& drop, MlpKind mlp, NormKind norm, int64_t n = 3) {
  Generator init(7);
  auto m = std::make_shared<Sequential>();
  for (int64_t i = 0; i < n; ++i) {
    m->push_back(std::make_shared<TransformerBlock>(
        16, 4, init, AttentionOptions{.causal = true, .dropout = 0.2, .generator = &drop, .kv_heads = 2},
        BlockOptions{.hidden = 24, .norm = norm, .mlp = mlp}));
  }
  return m;
}

struct Result {
  std::map<std::string, std::vector<float>> grads;
  std::vector<float> input_grad;
  float loss = 0;
  size_t kept = 0;  // bytes of "other" memory alive between forward and backward
};

Result step(Recompute mode, MlpKind mlp, NormKind norm, int64_t layers = 0) {
  Generator drop(3, 1);
  auto model = blocks(drop, mlp, norm);
  apply_recompute(*model, {.mode = mode, .layers = layers});
  Tensor x = random({2, 12, 16}, 5);
  x.set_requires_grad(true);
  CachingAllocator& a = CachingAllocator::host();
  const size_t before = a.stats()[MemoryCategory::other].in_use;
  Tensor y = model->forward(x);
  const Tensor loss = sum(mul(y, y));
  Result r;
  r.kept = a.stats()[MemoryCategory::other].in_use - before;
  backward(loss);
  r.loss = static_cast<float>(loss.item());
  for (const auto& [n, p] : model->named_parameters()) r.grads[n] = p.grad().to_vector<float>();
  r.input_grad = x.grad().to_vector<float>();
  return r;
}

void expect_equal(const Result& a, const Result& b, const std::string& what) {
  EXPECT_EQ(a.loss, b.loss) << what;
  EXPECT_EQ(a.input_grad, b.input_grad) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [n, g] : a.grads) EXPECT_EQ(b.grads.at(n), g) << what << ": " << n;
}

TEST(Recompute, FullAndSelectiveGiveBitEqualGradientsWithDropout) {
  Deterministic pin;
  for (MlpKind mlp : {MlpKind::gelu, MlpKind::swiglu}) {
    for (NormKind norm : {NormKind::layer, NormKind::rms}) {
      const Result none = step(Recompute::none, mlp, norm);
      expect_equal(none, step(Recompute::full, mlp, norm), "full");
      expect_equal(none, step(Recompute::selective, mlp, norm), "selective");
      expect_equal(none, step(Recompute::full, mlp, norm, 2), "full, first 2 blocks");
    }
  }
}

TEST(Recompute, KeepsLessBetweenForwardAndBackward) {
  Deterministic pin;
  const Result none = step(Recompute::none, MlpKind::gelu, NormKind::layer);
  const Result selective = step(Recompute::selective, MlpKind::gelu, NormKind::layer);
  const Result full = step(Recompute::full, MlpKind::gelu, NormKind::layer);
  EXPECT_LT(full.kept, selective.kept);
  EXPECT_LT(selective.kept, none.kept);
  // Full keeps each block's input and output alone ([2, 12, 16] f32 each).
  EXPECT_LE(full.kept, size_t{4} * 2 * 12 * 16 * 4);
}

TEST(Recompute, CheckpointReplaysDropoutAndReachesParameters) {
  Deterministic pin;
  Generator drop(11, 2);
  auto run = [&](bool ckpt, bool input_grad) {
    Tensor w = random({8}, 1);
    w.set_requires_grad(true);
    Tensor x = random({4, 8}, 2);
    if (input_grad) x.set_requires_grad(true);
    drop.set_state({11, 2, 0});
    auto fn = [&](const Tensor& v) { return gelu(braid::dropout(mul(v, w), {.p = 0.5, .generator = &drop})); };
    const Tensor y = ckpt ? checkpoint(fn, x, {&drop}) : fn(x);
    // A draw after the checkpoint sees the generator where the step left it.
    const Tensor after = braid::dropout(y, {.p = 0.5, .generator = &drop});
    backward(sum(after));
    return std::make_pair(w.grad().to_vector<float>(), input_grad ? x.grad().to_vector<float>() : std::vector<float>{});
  };
  for (bool input_grad : {true, false}) EXPECT_EQ(run(true, input_grad), run(false, input_grad));
}

// The attention core rematerialised into its output projection (what
// selective does where the core keeps its weights; the fused CPU kernel does
// not, so the block leaves it alone): the refill keeps the rerun's graph and
// redraws the attention dropout.
TEST(Recompute, RematerializedAttentionCoreEqualsPlain) {
  Deterministic pin;
  Generator init(4), drop_gen(8, 3);
  Linear proj(16, 16, init);
  Dropout drop(0.3, &drop_gen);
  EXPECT_FALSE(attend_keeps_scores(random({1, 4, 48}, 1)));  // f32 on the CPU: the fused kernel
  auto run = [&](bool remat) {
    proj.weight().zero_grad();
    drop_gen.set_state({8, 3, 0});
    Tensor qkv = random({2, 12, 48}, 6);  // 4 heads of 4: q, k, v side by side
    qkv.set_requires_grad(true);
    auto core = [&](const Tensor& v) { return attend(v, 4, 4, true, 0, &drop); };
    Tensor y;
    if (remat) {
      Rematerialized r(core, qkv, {&drop_gen});
      y = r.release_after(proj.forward(r.output()));
      EXPECT_TRUE(r.output().storage()->released());
    } else {
      y = proj.forward(core(qkv));
    }
    backward(sum(mul(y, y)));
    return std::make_pair(qkv.grad().to_vector<float>(), proj.weight().grad().to_vector<float>());
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(Recompute, NoRecordingRunsThePlainForward) {
  Generator drop(3, 1);
  auto model = blocks(drop, MlpKind::gelu, NormKind::layer, 1);
  apply_recompute(*model, {.mode = Recompute::selective});
  model->eval();
  autograd::NoGradGuard no_grad;
  const Tensor x = random({1, 5, 16}, 9);
  const Tensor y = model->forward(x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.shape(), x.shape());
}

TEST(Recompute, RefusesModelsWithoutBlocks) {
  Sequential mlp;
  Generator g(1);
  mlp.push_back(std::make_shared<Linear>(4, 4, g));
  EXPECT_THROW(apply_recompute(mlp, {.mode = Recompute::full}), ConfigError);
  EXPECT_EQ(apply_recompute(mlp, {.mode = Recompute::none}), 0);
  EXPECT_THROW(parse_recompute("true"), ConfigError);
}

}  // namespace
}  // namespace braid::nn
