// Hugging Face checkpoints against transformers itself (tests/models/hf_ref.py
// under .venv): tiny GPT-2 and LLaMA models with random weights, made there,
// load here with equal logits and equal greedy generations; models braid
// builds, exported here, load there with equal logits. Both ways for GPT-2
// (tied; untied with exact GELU and a wider MLP) and LLaMA (grouped-query
// attention untied; one key-value head tied, with biases on export), plus a
// sharded index and the published GPT-2 spelling.
#include <gtest/gtest.h>

#include "braid/models/hf_checkpoint.h"
#include "braid/ops/shape.h"
#include "tests/models/hf_testing.h"
#include "tests/ops/torch_oracle.h"
#include "tests/testing/temp_dir.h"

namespace braid::models {
namespace {

using hftest::read_tensors;
using testing::all_close;

TEST(HfTransformers, ImportedModelsGiveTransformersLogitsAndGreedyTokens) {
  BRAID_REQUIRE_VENV();
  test::TempDir dir;
  const std::string err = hftest::run_hf_ref("make '" + dir.str() + "'", dir.file("make.log"));
  ASSERT_EQ(err, "");
  struct Case {
    std::string folder, ref;
    HfArch arch;
  };
  const std::vector<Case> cases = {{"gpt2", "gpt2", HfArch::gpt2},
                                   {"gpt2_untied_gelu", "gpt2_untied_gelu", HfArch::gpt2},
                                   {"llama_gqa", "llama_gqa", HfArch::llama},
                                   {"llama_tied_mqa", "llama_tied_mqa", HfArch::llama},
                                   {"gpt2_sharded", "gpt2", HfArch::gpt2},
                                   {"gpt2_published", "gpt2", HfArch::gpt2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.folder);
    const HfModel m = load_hf(dir.file(c.folder));
    EXPECT_EQ(m.arch, c.arch);
    auto ref = read_tensors(dir.file(c.ref + ".ref.safetensors"));
    const Tensor logits = m.model->forward(ref.at("tokens")).detach();
    EXPECT_TRUE(all_close(logits, ref.at("logits"), 1e-4, 1e-4));
    const std::vector<int64_t> prompt = ref.at("prompt").to_vector<int64_t>();
    Generator gen(0);
    const std::vector<int64_t> out = generate(*m.model, prompt, 10, 15, {.temperature = 0}, gen);
    const std::vector<int64_t> fresh(out.begin() + 5, out.end());
    EXPECT_EQ(fresh, ref.at("generated").to_vector<int64_t>());
  }
  // What config.json said, as braid reads it.
  const GptConfig gqa = read_hf_config(dir.file("llama_gqa")).config;
  EXPECT_EQ(gqa.kv_heads, 2);
  EXPECT_EQ(gqa.hidden, 40);
  EXPECT_EQ(gqa.rope_theta, 500);
  EXPECT_FALSE(gqa.tie_embeddings);
  const GptConfig untied = read_hf_config(dir.file("gpt2_untied_gelu")).config;
  EXPECT_EQ(untied.activation, nn::MlpKind::gelu);
  EXPECT_EQ(untied.hidden, 48);
  EXPECT_EQ(untied.layers, 3);
}

// Weights wider than GPT-2's 0.02, so logits differ clearly between tokens.
GptConfig wide(GptConfig c) {
  c.init_std = 0.3;
  return c;
}

TEST(HfTransformers, ExportedModelsLoadInTransformersWithEqualLogits) {
  BRAID_REQUIRE_VENV();
  test::TempDir dir;
  const GptConfig gpt2 = wide({.vocab = 61, .context = 24, .layers = 2, .heads = 4, .dim = 32});
  GptConfig gpt2_untied = gpt2;
  gpt2_untied.tie_embeddings = false;
  gpt2_untied.activation = nn::MlpKind::gelu;
  gpt2_untied.hidden = 40;
  GptConfig llama = gpt2;
  llama.norm = nn::NormKind::rms;
  llama.norm_eps = 1e-6;
  llama.position = Position::rope;
  llama.rope_theta = 1000;
  llama.activation = nn::MlpKind::swiglu;
  llama.hidden = 48;
  llama.bias = false;
  llama.kv_heads = 2;
  llama.tie_embeddings = false;
  GptConfig llama_tied = llama;
  llama_tied.kv_heads = 1;
  llama_tied.tie_embeddings = true;
  llama_tied.bias = true;  // attention_bias and mlp_bias
  const std::vector<std::pair<std::string, GptConfig>> configs = {
      {"gpt2", gpt2}, {"gpt2_untied", gpt2_untied}, {"llama", llama}, {"llama_tied_bias", llama_tied}};

  Generator gen(9);
  Tensor tokens = Tensor::empty({2, 10}, DType::i64);
  for (int64_t i = 0; i < tokens.numel(); ++i) tokens.data<int64_t>()[i] = gen.below(61);
  hftest::write_tensors(dir.file("tokens.safetensors"), {{"tokens", tokens}});
  std::vector<Tensor> expected;
  std::string folders;
  for (const auto& [name, config] : configs) {
    auto model = gpt(config, gen);
    model->eval();
    expected.push_back(model->forward(tokens).detach());
    save_hf(*model, config, dir.file(name), hf_arch_for(config));
    folders += " '" + dir.file(name) + "'";
    // Read back by braid: the same tensors, bit for bit.
    const HfModel back = load_hf(dir.file(name));
    const nn::NamedTensors a = model->state_dict(), b = back.model->state_dict();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(all_close(a[i].second, b[i].second, 0, 0)) << a[i].first;
  }
  const std::string err = hftest::run_hf_ref("logits '" + dir.file("tokens.safetensors") + "'" + folders,
                                             dir.file("logits.log"));
  ASSERT_EQ(err, "");
  for (size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE(configs[i].first);
    const Tensor theirs = read_tensors(dir.file(configs[i].first + ".logits.safetensors")).at("logits");
    EXPECT_TRUE(all_close(expected[i], theirs, 1e-4, 1e-4));
  }
}

}  // namespace
}  // namespace braid::models
