// The gpt family against an independent PyTorch implementation
// (tests/models/gpt_ref.py): loss, logits and every parameter's gradient for
// a GPT-2 layout, a LLaMA layout (RMSNorm, rotary positions, SwiGLU,
// grouped-query attention, no biases, untied head) and a mix; decoding with a
// key-value cache against the full forward; GPT-2's initialisation.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/models/gpt.h"
#include "braid/nn/loss.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "tests/ops/torch_oracle.h"

namespace braid::models {
namespace {

using testing::all_close;

struct Named {
  std::string name;
  GptConfig config;
};

std::vector<Named> layouts() {
  GptConfig gpt2{.vocab = 37, .context = 16, .layers = 2, .heads = 4, .dim = 32};
  GptConfig llama = gpt2;
  llama.kv_heads = 2;
  llama.hidden = 40;
  llama.norm = nn::NormKind::rms;
  llama.norm_eps = 1e-6;
  llama.position = Position::rope;
  llama.activation = nn::MlpKind::swiglu;
  llama.bias = false;
  llama.tie_embeddings = false;
  GptConfig mixed = gpt2;
  mixed.kv_heads = 1;
  mixed.position = Position::rope;
  mixed.rope_theta = 500;
  mixed.activation = nn::MlpKind::gelu;
  mixed.layers = 3;
  return {{"gpt2", gpt2}, {"llama", llama}, {"mixed", mixed}};
}

std::string to_json(const GptConfig& c) {
  return nlohmann::json{{"layers", c.layers},
                        {"heads", c.heads},
                        {"kv_heads", c.kv_heads},
                        {"norm", c.norm == nn::NormKind::rms ? "rms" : "layer"},
                        {"norm_eps", c.norm_eps},
                        {"position", c.position == Position::rope ? "rope" : "learned"},
                        {"rope_theta", c.rope_theta},
                        {"activation", c.activation == nn::MlpKind::swiglu ? "swiglu"
                                       : c.activation == nn::MlpKind::gelu ? "gelu"
                                                                           : "gelu_tanh"},
                        {"tie_embeddings", c.tie_embeddings}}
      .dump();
}

Tensor random_tokens(int64_t b, int64_t t, int64_t vocab, Generator& gen) {
  Tensor x = Tensor::empty({b, t}, DType::i64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u32() % vocab);
  return x;
}

TEST(Gpt, MatchesTorchReference) {
  BRAID_REQUIRE_TORCH();
  std::vector<testing::TorchCase> cases;
  struct Run {
    std::string name;
    std::shared_ptr<nn::Sequential> model;
    Tensor loss, logits;
  };
  std::vector<Run> runs;
  for (const auto& [name, config] : layouts()) {
    Generator gen(7);
    auto model = gpt(config, gen);
    const Tensor tokens = random_tokens(2, 12, config.vocab, gen), targets = random_tokens(2, 12, config.vocab, gen);
    const Tensor logits = model->forward(tokens);
    const Tensor loss = nn::cross_entropy_loss(logits, targets);
    backward(loss);
    testing::TorchCase c;
    c.expr = "__import__('runpy').run_path('" BRAID_TESTS_DIR "/models/gpt_ref.py')['gpt_loss']('" + to_json(config) +
             "', globals())";
    c.inputs = {{"tokens", tokens}, {"targets", targets}};
    for (const auto& [pname, p] : model->named_parameters()) {
      c.inputs.emplace_back(pname, p.detach());
      c.options.grad.push_back(pname);
    }
    cases.push_back(c);
    runs.push_back({name, model, loss, logits});
  }
  const auto results = testing::torch_eval_batch(cases);
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(runs[i].name);
    EXPECT_TRUE(all_close(runs[i].loss, results[i].outputs.at(0), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(runs[i].logits, results[i].outputs.at(1), 1e-4, 1e-5));
    for (const auto& [pname, p] : runs[i].model->named_parameters()) {
      EXPECT_TRUE(all_close(p.grad(), results[i].grads.at(pname), 1e-3, 1e-5)) << pname;
    }
  }
}

TEST(Gpt, CachedDecodingEqualsFullForward) {
  for (const auto& [name, config] : layouts()) {
    SCOPED_TRACE(name);
    Generator gen(11);
    auto model = gpt(config, gen);
    model->eval();
    const Tensor tokens = random_tokens(2, 10, config.vocab, gen);
    const Tensor full = model->forward(tokens).detach();
    Decoder decoder(*model, config.context);
    // A prompt of 4 (prefill), then one position at a time.
    Tensor got = decoder.forward(slice(tokens, 1, 0, 4));
    EXPECT_TRUE(all_close(got, slice(full, 1, 0, 4), 1e-4, 1e-5));
    for (int64_t t = 4; t < 10; ++t) {
      got = decoder.forward(slice(tokens, 1, t, t + 1));
      EXPECT_TRUE(all_close(got, slice(full, 1, t, t + 1), 1e-4, 1e-5)) << "position " << t;
    }
    EXPECT_EQ(decoder.length(), 10);
    EXPECT_THROW(Decoder(*model, config.context).forward(random_tokens(1, config.context + 1, config.vocab, gen)),
                 ValueError);
  }
}

// Greedy generation with the cache picks, token for token, the argmax of a
// full forward over everything so far.
TEST(Gpt, GreedyGenerationEqualsUncachedArgmax) {
  for (const auto& [name, config] : layouts()) {
    SCOPED_TRACE(name);
    Generator gen(3);
    auto model = gpt(config, gen);
    const std::vector<int64_t> prompt = {1, 5, 9};
    const std::vector<int64_t> fast = generate(*model, prompt, 8, config.context, {.temperature = 0}, gen);
    std::vector<int64_t> slow = prompt;
    model->eval();
    for (int i = 0; i < 8; ++i) {
      Tensor ids = Tensor::empty({1, static_cast<int64_t>(slow.size())}, DType::i64);
      std::copy(slow.begin(), slow.end(), ids.data<int64_t>());
      const Tensor logits = model->forward(ids);
      const int64_t t = logits.size(1);
      slow.push_back(sample_token(slice(logits.detach(), 1, t - 1, t), {.temperature = 0}, gen));
    }
    EXPECT_EQ(fast, slow);
  }
}

TEST(Gpt, SamplingRespectsTopKAndTopP) {
  Tensor logits = Tensor::empty({5});
  const float v[5] = {3, 2.9f, 0, -1, -2};
  std::copy(v, v + 5, logits.data<float>());
  Generator gen(5);
  for (int i = 0; i < 200; ++i) {
    EXPECT_LT(sample_token(logits, {.temperature = 1, .top_k = 2}, gen), 2);
    // The top two hold ~0.85 of the mass: top_p 0.5 keeps them (the first alone is under 0.5).
    EXPECT_LT(sample_token(logits, {.temperature = 1, .top_p = 0.5}, gen), 2);
  }
  EXPECT_EQ(sample_token(logits, {.temperature = 0}, gen), 0);
}

TEST(Gpt, InitialisesAsGpt2) {
  GptConfig c{.vocab = 500, .context = 64, .layers = 4, .heads = 4, .dim = 128};
  Generator gen(1);
  auto model = gpt(c, gen);
  auto stddev = [](const Tensor& t) {
    const Tensor x = t.detach().to(DType::f64).contiguous();
    double s = 0, ss = 0;
    for (int64_t i = 0; i < x.numel(); ++i) s += x.data<double>()[i], ss += x.data<double>()[i] * x.data<double>()[i];
    const double n = static_cast<double>(x.numel());
    return std::sqrt(ss / n - (s / n) * (s / n));
  };
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.ends_with("out_proj.weight") || name.ends_with("fc2.weight")) {
      EXPECT_NEAR(stddev(p), 0.02 / std::sqrt(8.0), 0.001) << name;
    } else if (p.ndim() == 2) {
      EXPECT_NEAR(stddev(p), 0.02, 0.001) << name;
    } else if (name.ends_with("bias")) {
      EXPECT_EQ(stddev(p), 0) << name;
    }
  }
  // Tied: the head has no parameter of its own; the table is counted once.
  EXPECT_EQ(model->named_parameters().size(), 2 + 4 * 12 + 2);
}

TEST(Gpt, RefusesConfigsThatCannotBeBuilt) {
  Generator gen(1);
  GptConfig c{.vocab = 10, .context = 8, .layers = 1, .heads = 4, .dim = 32};
  c.kv_heads = 3;
  EXPECT_THROW(gpt(c, gen), ConfigError);
  c.kv_heads = 0;
  c.heads = 5;
  EXPECT_THROW(gpt(c, gen), ConfigError);
  c.heads = 4;
  c.vocab = 0;
  EXPECT_THROW(gpt(c, gen), ConfigError);
}

}  // namespace
}  // namespace braid::models
