#include "braid/train/model_families.h"

namespace braid::train {

models::GptConfig gpt_config(const Config& c, const ModelInfo& info) {
  if (info.input_shape.size() != 1) {
    fail<ConfigError>("model.name = gpt needs token sequences [T], the dataset gives {}", to_string(info.input_shape));
  }
  models::GptConfig g;
  const int64_t vocab = c.get_int("model.vocab");
  if (vocab > 0 && vocab < info.classes) {
    fail<ConfigError>("model.vocab = {} is smaller than the dataset's vocabulary of {}", vocab, info.classes);
  }
  g.vocab = vocab > 0 ? vocab : info.classes;
  g.context = info.input_shape[0];
  g.layers = c.get_int("model.n_layers");
  g.heads = c.get_int("model.n_heads");
  g.kv_heads = c.get_int("model.kv_heads");
  g.dim = c.get_int("model.d_model");
  g.hidden = c.get_int("model.mlp_hidden");
  if (g.hidden == 0) g.mlp_ratio = c.get_float("model.mlp_ratio");
  const std::string& norm = c.get_string("model.norm");
  g.norm = norm == "rms" ? nn::NormKind::rms : nn::NormKind::layer;
  g.norm_eps = c.get_float("model.norm_eps");
  g.position = c.get_string("model.position") == "rope" ? models::Position::rope : models::Position::learned;
  if (g.position == models::Position::rope) g.rope_theta = c.get_float("model.rope_theta");
  const std::string& act = c.get_string("model.activation");
  g.activation = act == "swiglu" ? nn::MlpKind::swiglu : act == "gelu" ? nn::MlpKind::gelu : nn::MlpKind::gelu_tanh;
  g.bias = c.get_bool("model.bias");
  g.tie_embeddings = c.get_bool("model.tie_embeddings");
  g.dropout = c.get_float("model.dropout");
  g.dropout_generator = info.dropout_generator;
  g.moe.experts = c.get_int("model.moe.experts");
  if (g.moe.experts > 0) {
    g.moe.top_k = c.get_int("model.moe.top_k");
    if (g.moe.top_k > g.moe.experts) {
      fail<ConfigError>("model.moe.top_k = {} exceeds model.moe.experts = {}", g.moe.top_k, g.moe.experts);
    }
    g.moe.every = c.get_int("model.moe.every");
    g.moe.capacity_factor = c.get_float("model.moe.capacity_factor");
    g.moe.shared_experts = c.get_int("model.moe.shared_experts");
    if (c.get_string("model.moe.balance") == "bias") {
      g.moe.balance = nn::MoeBalance::bias;
      g.moe.bias_rate = c.get_float("model.moe.bias_rate");
      if (!(g.moe.bias_rate > 0)) fail<ConfigError>("model.moe.bias_rate must be positive with model.moe.balance = bias");
    } else {
      g.moe.aux_loss = c.get_float("model.moe.aux_loss");
    }
    g.moe.z_loss = c.get_float("model.moe.z_loss");
    const std::string& on = c.get_string("train.device");
    if (on != "cpu") {
      fail<ConfigError>("model.moe.experts on train.device = {}: the grouped GEMM runs on the CPU only", on);
    }
  }
  // RMSNorm, rotary positions and SwiGLU have CPU kernels only so far.
  const std::string& device = c.get_string("train.device");
  if (device != "cpu" && (g.norm == nn::NormKind::rms || g.position == models::Position::rope ||
                          g.activation == nn::MlpKind::swiglu)) {
    fail<ConfigError>("model.name = gpt on train.device = {}: model.norm = rms, model.position = rope and "
                      "model.activation = swiglu have no GPU kernels yet (the GPT-2 layout runs there)",
                      device);
  }
  try {
    models::validate(g);
  } catch (const ConfigError& e) {
    fail<ConfigError>("model.name = gpt: {}", e.what());
  }
  return g;
}

std::shared_ptr<nn::Module> build_gpt(const Config& config, const ModelInfo& info, Generator& gen) {
  return models::gpt(gpt_config(config, info), gen);
}

}  // namespace braid::train
