// The mixture-of-experts layer (braid/nn/moe.h) against a dense PyTorch
// reference (tests/nn/moe_ref.py): the same weights, routing and capacity;
// output, auxiliary losses, router statistics and every gradient of
// sum(y * R) + aux_loss * balance + z_loss * z (the auxiliary losses reach
// the gradients through the layer's output alone).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/nn/attention.h"
#include "braid/nn/moe.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "tests/ops/torch_oracle.h"

namespace braid::nn {
namespace {

struct Case {
  std::string name;
  MlpKind mlp;
  const char* mlp_name;
  MoeOptions o;
};

std::vector<Case> cases() {
  return {
      {"gelu top-2 dropless", MlpKind::gelu, "gelu", {.experts = 4, .top_k = 2}},
      {"swiglu top-2 capacity 1 shared", MlpKind::swiglu, "swiglu",
       {.experts = 4, .top_k = 2, .capacity_factor = 1.0, .shared_experts = 1, .aux_loss = 0.1, .z_loss = 0.01}},
      {"gelu_tanh top-1 capacity 1.25", MlpKind::gelu_tanh, "gelu_tanh",
       {.experts = 5, .top_k = 1, .capacity_factor = 1.25, .aux_loss = 0.5, .z_loss = 0.2}},
      {"gelu top-3 capacity 0.5", MlpKind::gelu, "gelu", {.experts = 6, .top_k = 3, .capacity_factor = 0.5}},
  };
}

TEST(MoE, MatchesDenseTorchReference) {
  BRAID_REQUIRE_TORCH();
  struct Run {
    std::shared_ptr<MoE> moe;
    Tensor x, loss, y;
    RouterStats stats;
  };
  std::vector<Run> runs;
  std::vector<testing::TorchCase> torch_cases;
  for (const Case& c : cases()) {
    Generator gen(17);
    auto moe = std::make_shared<MoE>(8, 12, c.mlp, c.o, gen);
    Tensor x = testing::random_tensor({2, 10, 8}, DType::f32, gen, -2, 2);
    x.set_requires_grad(true);
    const Tensor r = testing::random_tensor({2, 10, 8}, DType::f32, gen);
    const Tensor y = moe->forward(x);
    const Tensor loss = sum(mul(y, r));
    backward(loss);
    testing::TorchCase t;
    const nlohmann::json config{{"experts", c.o.experts}, {"top_k", c.o.top_k},
                                {"capacity_factor", c.o.capacity_factor}, {"aux_loss", c.o.aux_loss},
                                {"z_loss", c.o.z_loss}, {"mlp", c.mlp_name}};
    t.expr = "__import__('runpy').run_path('" BRAID_TESTS_DIR "/nn/moe_ref.py')['moe']('" + config.dump() +
             "', globals())";
    t.inputs = {{"x", x.detach()}, {"R", r}};
    t.options.grad = {"x"};
    for (const auto& [name, p] : moe->named_parameters()) {
      t.inputs.emplace_back(name, p.detach());
      t.options.grad.push_back(name);
    }
    torch_cases.push_back(t);
    runs.push_back({moe, x, loss, y, moe->take_stats()});
  }
  const auto results = testing::torch_eval_batch(torch_cases);
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(cases()[i].name);
    const Run& run = runs[i];
    const testing::TorchResult& ref = results[i];
    EXPECT_TRUE(testing::all_close(run.y, ref.outputs.at(1), 1e-4, 1e-5));
    EXPECT_NEAR(run.stats.aux_loss, ref.outputs.at(2).item(), 1e-5);
    EXPECT_NEAR(run.stats.z_loss, ref.outputs.at(3).item(), 1e-4);
    // The loss braid differentiated is sum(y R); the reference adds the weighted auxiliary losses.
    const MoeOptions& o = cases()[i].o;
    EXPECT_NEAR(run.loss.item() + o.aux_loss * run.stats.aux_loss + o.z_loss * run.stats.z_loss,
                ref.outputs.at(0).item(), 1e-3);
    const Tensor tokens = ref.outputs.at(4);
    ASSERT_EQ(static_cast<int64_t>(run.stats.tokens.size()), o.experts);
    for (int64_t e = 0; e < o.experts; ++e) EXPECT_EQ(run.stats.tokens[e], tokens.data<int64_t>()[e]) << e;
    EXPECT_EQ(run.stats.dropped, static_cast<int64_t>(ref.outputs.at(5).item()));
    EXPECT_EQ(run.stats.assigned, 20 * o.top_k);
    if (o.capacity_factor > 0 && o.capacity_factor < 1) {
      EXPECT_GT(run.stats.dropped, 0);
    }
    EXPECT_TRUE(testing::all_close(run.x.grad(), ref.grads.at("x"), 1e-3, 1e-5));
    for (const auto& [name, p] : run.moe->named_parameters()) {
      EXPECT_TRUE(testing::all_close(p.grad(), ref.grads.at(name), 1e-3, 1e-5)) << name;
    }
  }
}

TEST(MoE, LossScaleWeighsOnlyTheAuxiliaryGradient) {
  Generator gen(5);
  const MoeOptions o{.experts = 3, .top_k = 2, .aux_loss = 1.0, .z_loss = 1.0};
  auto moe = std::make_shared<MoE>(4, 6, MlpKind::gelu, o, gen);
  const Tensor x = testing::random_tensor({7, 4}, DType::f32, gen);
  // With a zero output gradient, the router's gradient is loss_scale x that of the auxiliary losses.
  auto router_grad = [&](double scale) {
    moe->set_loss_scale(scale);
    moe->router()->weight().set_grad(Tensor());
    backward(sum(mul(moe->forward(x), 0.0)));
    return moe->router()->weight().grad().clone();
  };
  const Tensor one = router_grad(1), quarter = router_grad(0.25);
  EXPECT_GT(sum(abs(one)).item(), 0);
  EXPECT_TRUE(testing::all_close(mul(one, 0.25), quarter, 1e-5, 1e-7));
}

TEST(MoE, RefusesBadOptions) {
  Generator gen(1);
  EXPECT_THROW(MoE(4, 8, MlpKind::gelu, {.experts = 2, .top_k = 3}, gen), ValueError);
  EXPECT_THROW(MoE(4, 8, MlpKind::gelu, {.experts = 0}, gen), ValueError);
  EXPECT_THROW(MoE(4, 8, MlpKind::gelu, {.experts = 2, .top_k = 1, .capacity_factor = -1}, gen), ValueError);
  MoE moe(4, 8, MlpKind::gelu, {.experts = 4, .top_k = 1}, gen);
  EXPECT_THROW(moe.forward(Tensor::zeros({3, 5})), ValueError);
  EXPECT_THROW(moe.keep_experts(3, 2, nullptr), ValueError);
  EXPECT_THROW(moe.forward(Tensor::empty({3, 4}, DType::f32, Device::meta)), ValueError);
}

// A block with an MoE MLP holds "moe.router", "moe.experts.fc1/fc2" in place of fc1/fc2.
TEST(MoE, TransformerBlockNamesAndRuns) {
  Generator gen(2);
  TransformerBlock block(8, 2, gen, {}, {.hidden = 16, .mlp = MlpKind::swiglu, .moe = {.experts = 4, .top_k = 2}});
  std::vector<std::string> names;
  for (const auto& [name, p] : block.named_parameters()) names.push_back(name);
  EXPECT_NE(std::find(names.begin(), names.end(), "moe.experts.fc1"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "fc1.weight"), names.end());
  EXPECT_EQ(block.moe()->experts()->fc1().shape(), (Shape{4, 32, 8}));
  const Tensor y = block.forward(testing::random_tensor({2, 5, 8}, DType::f32, gen));
  EXPECT_EQ(y.shape(), (Shape{2, 5, 8}));
}

}  // namespace
}  // namespace braid::nn
