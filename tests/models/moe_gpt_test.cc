// The gpt family with mixture-of-experts MLPs (docs/moe.md): which blocks get
// them (model.moe.every), GPT-2's initialisation of the experts, decoding with
// a key-value cache against the full forward, and the refusals of bad configs.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/models/gpt.h"
#include "braid/ops/shape.h"
#include "tests/ops/torch_oracle.h"

namespace braid::models {
namespace {

GptConfig moe_config() {
  GptConfig c{.vocab = 41, .context = 16, .layers = 4, .heads = 4, .dim = 32};
  c.moe = {.experts = 4, .top_k = 2, .every = 2};
  return c;
}

Tensor random_tokens(int64_t b, int64_t t, int64_t vocab, Generator& gen) {
  Tensor x = Tensor::empty({b, t}, DType::i64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u32() % vocab);
  return x;
}

TEST(MoeGpt, EveryNthBlockHasExperts) {
  Generator gen(3);
  auto model = gpt(moe_config(), gen);
  for (int64_t i = 1; i <= 4; ++i) {
    auto& block = dynamic_cast<nn::TransformerBlock&>((*model)[static_cast<size_t>(i)]);
    EXPECT_EQ(block.moe() != nullptr, i % 2 == 0) << "block " << i;
    EXPECT_EQ(block.fc1() == nullptr, i % 2 == 0) << "block " << i;
  }
  // GPT-2's draws: experts' fc1 N(0, 0.02), fc2 (the end of a residual branch) N(0, 0.02 / sqrt(2 L)).
  auto std_of = [](const Tensor& t) {
    const Tensor v = t.detach().contiguous();
    double s = 0;
    for (int64_t i = 0; i < v.numel(); ++i) s += static_cast<double>(v.data<float>()[i]) * v.data<float>()[i];
    return std::sqrt(s / static_cast<double>(v.numel()));
  };
  const auto& moe = *dynamic_cast<nn::TransformerBlock&>((*model)[2]).moe();
  EXPECT_NEAR(std_of(moe.experts()->fc1()), 0.02, 0.002);
  EXPECT_NEAR(std_of(moe.experts()->fc2()), 0.02 / std::sqrt(8.0), 0.001);
}

// Dropless routing is per token, so one position at a time routes as the whole sequence does.
TEST(MoeGpt, CachedDecodingEqualsFullForward) {
  Generator gen(5);
  GptConfig c = moe_config();
  c.activation = nn::MlpKind::swiglu;
  c.moe.shared_experts = 1;
  auto model = gpt(c, gen);
  model->eval();
  const Tensor tokens = random_tokens(2, 9, c.vocab, gen);
  const Tensor full = model->forward(tokens).detach();
  Decoder decoder(*model, c.context);
  Tensor got = decoder.forward(slice(tokens, 1, 0, 4));
  EXPECT_TRUE(testing::all_close(got, slice(full, 1, 0, 4), 1e-4, 1e-5));
  for (int64_t t = 4; t < 9; ++t) {
    got = decoder.forward(slice(tokens, 1, t, t + 1));
    EXPECT_TRUE(testing::all_close(got, slice(full, 1, t, t + 1), 1e-4, 1e-5)) << "position " << t;
  }
}

TEST(MoeGpt, RefusesBadExpertConfigs) {
  Generator gen(1);
  GptConfig c = moe_config();
  c.moe.top_k = 5;
  EXPECT_THROW(gpt(c, gen), ConfigError);
  c = moe_config();
  c.moe.every = 0;
  EXPECT_THROW(gpt(c, gen), ConfigError);
}

}  // namespace
}  // namespace braid::models
