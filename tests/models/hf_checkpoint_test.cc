// The Hugging Face layout without transformers: where each braid tensor goes
// (Conv1D transposes, q/k/v and gate/up split), both GPT-2 spellings, a
// sharded index, and bad folders refused by name: an unknown architecture,
// settings braid does not implement, a tensor of the wrong shape (both shapes
// named), missing or unexpected tensors, a pickle-only folder, a config an
// architecture cannot hold. (hf_transformers_test.cc checks against
// transformers itself.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "braid/models/hf_checkpoint.h"
#include "braid/ops/shape.h"
#include "tests/models/hf_testing.h"
#include "tests/ops/torch_oracle.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::models {
namespace {

using testing::all_close;
namespace fs = std::filesystem;

GptConfig gpt2_config() { return {.vocab = 50, .context = 16, .layers = 2, .heads = 4, .dim = 32, .init_std = 0.3}; }

GptConfig llama_config() {
  GptConfig c = gpt2_config();
  c.norm = nn::NormKind::rms;
  c.position = Position::rope;
  c.activation = nn::MlpKind::swiglu;
  c.bias = false;
  c.kv_heads = 2;
  c.hidden = 24;
  c.tie_embeddings = false;
  return c;
}

Tensor param(const nn::Module& m, const std::string& name) {
  for (const auto& [n, t] : m.state_dict()) {
    if (n == name) return t.detach();
  }
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

Tensor transposed(const Tensor& t) { return transpose(t, 0, 1).contiguous(); }

TEST(HfCheckpoint, Gpt2LayoutTransposesConv1DAndRoundTrips) {
  Generator gen(1);
  const GptConfig c = gpt2_config();
  auto m = gpt(c, gen);
  const auto hf = to_hf_state(m->state_dict(), c, HfArch::gpt2);
  // Tied head: no lm_head; 2 embeddings + 12 per layer + the final norm's 2.
  EXPECT_EQ(hf.size(), 2u + 12 * 2 + 2);
  EXPECT_FALSE(hf.count("lm_head.weight"));
  EXPECT_TRUE(all_close(hf.at("transformer.wte.weight"), param(*m, "0.tok.weight"), 0, 0));
  EXPECT_TRUE(all_close(hf.at("transformer.wpe.weight"), param(*m, "0.pos"), 0, 0));
  EXPECT_TRUE(all_close(hf.at("transformer.h.1.attn.c_attn.weight"), transposed(param(*m, "2.attn.in_proj.weight")), 0, 0));
  EXPECT_TRUE(all_close(hf.at("transformer.h.0.mlp.c_proj.weight"), transposed(param(*m, "1.fc2.weight")), 0, 0));
  EXPECT_TRUE(all_close(hf.at("transformer.ln_f.bias"), param(*m, "3.bias"), 0, 0));
  const nn::NamedTensors back = from_hf_state(hf, c, HfArch::gpt2, "test");
  const nn::NamedTensors mine = m->state_dict();
  ASSERT_EQ(back.size(), mine.size());
  std::map<std::string, Tensor> by_name(back.begin(), back.end());
  for (const auto& [n, t] : mine) EXPECT_TRUE(all_close(by_name.at(n), t.detach(), 0, 0)) << n;
}

TEST(HfCheckpoint, LlamaLayoutSplitsPackedProjections) {
  Generator gen(2);
  const GptConfig c = llama_config();  // 4 heads of 8, 2 key-value heads
  auto m = gpt(c, gen);
  const auto hf = to_hf_state(m->state_dict(), c, HfArch::llama);
  const Tensor in_proj = param(*m, "1.attn.in_proj.weight");  // [(4 + 2 + 2) * 8, 32]
  EXPECT_TRUE(all_close(hf.at("model.layers.0.self_attn.q_proj.weight"), slice(in_proj, 0, 0, 32), 0, 0));
  EXPECT_TRUE(all_close(hf.at("model.layers.0.self_attn.k_proj.weight"), slice(in_proj, 0, 32, 48), 0, 0));
  EXPECT_TRUE(all_close(hf.at("model.layers.0.self_attn.v_proj.weight"), slice(in_proj, 0, 48, 64), 0, 0));
  const Tensor fc1 = param(*m, "2.fc1.weight");  // [gate; up], 24 rows each
  EXPECT_TRUE(all_close(hf.at("model.layers.1.mlp.gate_proj.weight"), slice(fc1, 0, 0, 24), 0, 0));
  EXPECT_TRUE(all_close(hf.at("model.layers.1.mlp.up_proj.weight"), slice(fc1, 0, 24, 48), 0, 0));
  EXPECT_TRUE(all_close(hf.at("lm_head.weight"), param(*m, "4.weight"), 0, 0));
  EXPECT_TRUE(all_close(hf.at("model.norm.weight"), param(*m, "3.weight"), 0, 0));
  const nn::NamedTensors back = from_hf_state(hf, c, HfArch::llama, "test");
  std::map<std::string, Tensor> by_name(back.begin(), back.end());
  for (const auto& [n, t] : m->state_dict()) EXPECT_TRUE(all_close(by_name.at(n), t.detach(), 0, 0)) << n;
  EXPECT_EQ(hf_sources(c, HfArch::llama).at("1.attn.in_proj.weight"),
            (std::vector<std::string>{"model.layers.0.self_attn.q_proj.weight",
                                      "model.layers.0.self_attn.k_proj.weight",
                                      "model.layers.0.self_attn.v_proj.weight"}));
}

// As the GPT-2 files on the Hub spell it: no "transformer." prefix, the
// causal-mask buffers kept, sometimes an lm_head copy of the tied table.
TEST(HfCheckpoint, ReadsThePublishedGpt2Spelling) {
  Generator gen(3);
  const GptConfig c = gpt2_config();
  auto m = gpt(c, gen);
  std::map<std::string, Tensor> published;
  for (const auto& [n, t] : to_hf_state(m->state_dict(), c, HfArch::gpt2)) published[n.substr(12)] = t;
  for (int i = 0; i < 2; ++i) {
    published["h." + std::to_string(i) + ".attn.bias"] = Tensor::ones({1, 1, 16, 16});
    published["h." + std::to_string(i) + ".attn.masked_bias"] = Tensor::scalar(-1e4);
  }
  published["lm_head.weight"] = param(*m, "0.tok.weight");
  const nn::NamedTensors back = from_hf_state(published, c, HfArch::gpt2, "test");
  std::map<std::string, Tensor> by_name(back.begin(), back.end());
  for (const auto& [n, t] : m->state_dict()) EXPECT_TRUE(all_close(by_name.at(n), t.detach(), 0, 0)) << n;
  // Both spellings of one tensor at once is ambiguous.
  published["transformer.wte.weight"] = published.at("wte.weight");
  EXPECT_NE(test::message_of<ValueError>([&] { from_hf_state(published, c, HfArch::gpt2, "test"); })
                .find("'wte.weight' is there twice"),
            std::string::npos);
}

class HfFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    Generator gen(4);
    model_ = gpt(gpt2_config(), gen);
    save_hf(*model_, gpt2_config(), dir_.file("good"), HfArch::gpt2);
  }
  // A copy of the good folder with config.json edited by `edit`.
  std::string with_config(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    fs::copy(dir_.file("good"), dir_.file(name), fs::copy_options::recursive);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir_.file(name + "/config.json")));
    edit(j);
    std::ofstream(dir_.file(name + "/config.json")) << j.dump();
    return dir_.file(name);
  }
  // A copy of the good folder whose tensors are edited by `edit`.
  std::string with_tensors(const std::string& name, const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    fs::copy(dir_.file("good"), dir_.file(name), fs::copy_options::recursive);
    auto t = to_hf_state(model_->state_dict(), gpt2_config(), HfArch::gpt2);
    edit(t);
    hftest::write_tensors(dir_.file(name + "/model.safetensors"), t);
    return dir_.file(name);
  }
  test::TempDir dir_;
  std::shared_ptr<nn::Sequential> model_;
};

TEST_F(HfFolders, ReadsWhatItWrote) {
  const HfModel m = load_hf(dir_.file("good"));
  EXPECT_EQ(m.arch, HfArch::gpt2);
  EXPECT_EQ(m.config.dim, 32);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir_.file("good/config.json")));
  EXPECT_EQ(j["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(safetensors::read_metadata(dir_.file("good/model.safetensors")).at("format"), "pt");
}

TEST_F(HfFolders, RefusesUnknownArchitecturesByName) {
  const std::string mistral = with_config("mistral", [](auto& j) {
    j["architectures"] = {"MistralForCausalLM"};
    j["model_type"] = "mistral";
  });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(mistral); }).find("architecture 'MistralForCausalLM'"),
            std::string::npos);
  const std::string bert = with_config("bert", [](auto& j) {
    j.erase("architectures");
    j["model_type"] = "bert";
  });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(bert); }).find("model_type 'bert'"), std::string::npos);
}

TEST_F(HfFolders, RefusesSettingsBraidDoesNotImplement) {
  const std::string relu = with_config("relu", [](auto& j) { j["activation_function"] = "relu"; });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(relu); }).find("activation_function 'relu'"), std::string::npos);
  const std::string scaled = with_config("scaled", [](auto& j) { j["scale_attn_by_inverse_layer_idx"] = true; });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(scaled); }).find("scale_attn_by_inverse_layer_idx"),
            std::string::npos);
  // A LLaMA with scaled rotary positions.
  Generator gen(5);
  auto llama = gpt(llama_config(), gen);
  save_hf(*llama, llama_config(), dir_.file("llama"), HfArch::llama);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir_.file("llama/config.json")));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  std::ofstream(dir_.file("llama/config.json")) << j.dump();
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(dir_.file("llama")); }).find("rope_scaling llama3"),
            std::string::npos);
}

TEST_F(HfFolders, NamesTheTensorAndBothShapesWhenTheyDiffer) {
  const std::string bad = with_tensors("shape", [](auto& t) {
    t["transformer.h.1.mlp.c_fc.weight"] = Tensor::zeros({32, 100});
  });
  const std::string msg = test::message_of<ValueError>([&] { read_hf(bad); });
  EXPECT_NE(msg.find("'transformer.h.1.mlp.c_fc.weight' has shape [32, 100] in the checkpoint; config.json gives "
                     "[32, 128]"),
            std::string::npos)
      << msg;
  // config.json says 3 layers, the file has 2.
  const std::string deeper = with_config("deeper", [](auto& j) { j["n_layer"] = 3; });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(deeper); }).find("'transformer.h.2.ln_1.weight' is missing"),
            std::string::npos);
  const std::string extra = with_tensors("extra", [](auto& t) { t["transformer.h.7.ln_1.weight"] = Tensor::ones({32}); });
  EXPECT_NE(test::message_of<ValueError>([&] { read_hf(extra); }).find("unexpected tensor 'transformer.h.7.ln_1.weight'"),
            std::string::npos);
}

TEST_F(HfFolders, ReadsAShardedIndex) {
  // Two files and an index, as save_pretrained(max_shard_size=...) writes.
  const fs::path d = dir_.file("sharded");
  fs::create_directories(d);
  fs::copy_file(dir_.file("good/config.json"), d / "config.json");
  const auto all = to_hf_state(model_->state_dict(), gpt2_config(), HfArch::gpt2);
  std::map<std::string, Tensor> a, b;
  nlohmann::json map;
  for (const auto& [n, t] : all) {
    const bool first = n.find("h.1.") == std::string::npos;
    (first ? a : b)[n] = t;
    map[n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  hftest::write_tensors((d / "model-00001-of-00002.safetensors").string(), a);
  hftest::write_tensors((d / "model-00002-of-00002.safetensors").string(), b);
  std::ofstream(d / "model.safetensors.index.json") << nlohmann::json{{"metadata", {}}, {"weight_map", map}}.dump();
  const HfModel m = load_hf(d.string());
  for (const auto& [n, t] : model_->state_dict()) EXPECT_TRUE(all_close(param(*m.model, n), t.detach(), 0, 0)) << n;
  // An index naming a tensor its file lacks.
  map["transformer.h.9.ln_1.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(d / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  EXPECT_NE(test::message_of<IoError>([&] { read_hf(d.string()); }).find("lists tensor 'transformer.h.9.ln_1.weight'"),
            std::string::npos);
}

TEST_F(HfFolders, RefusesAPickleOnlyFolderAndMissingFiles) {
  fs::create_directories(dir_.file("pickle"));
  fs::copy_file(dir_.file("good/config.json"), dir_.file("pickle/config.json"));
  std::ofstream(dir_.file("pickle/pytorch_model.bin")) << "not read";
  EXPECT_NE(test::message_of<IoError>([&] { read_hf(dir_.file("pickle")); }).find("safetensors"), std::string::npos);
  EXPECT_NE(test::message_of<IoError>([&] { read_hf(dir_.file("nowhere")); }).find("not a folder"), std::string::npos);
}

TEST(HfCheckpoint, RefusesAConfigTheArchitectureCannotHold) {
  Generator gen(6);
  const GptConfig llama = llama_config();
  auto m = gpt(llama, gen);
  test::TempDir dir;
  const std::string msg = test::message_of<ConfigError>([&] { save_hf(*m, llama, dir.file("x"), HfArch::gpt2); });
  EXPECT_NE(msg.find("a gpt2 checkpoint cannot hold norm = rms"), std::string::npos) << msg;
  EXPECT_EQ(hf_arch_for(llama), HfArch::llama);
  EXPECT_EQ(hf_arch_for(gpt2_config()), HfArch::gpt2);
  GptConfig mixed = gpt2_config();
  mixed.position = Position::rope;
  EXPECT_THROW(hf_arch_for(mixed), ConfigError);
}

}  // namespace
}  // namespace braid::models
