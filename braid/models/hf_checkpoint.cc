#include "braid/models/hf_checkpoint.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/base/safetensors.h"

namespace braid::models {

namespace fs = std::filesystem;
using nlohmann::json;

const char* hf_arch_name(HfArch arch) { return arch == HfArch::gpt2 ? "gpt2" : "llama"; }

HfArch parse_hf_arch(std::string_view name) {
  if (name == "gpt2") return HfArch::gpt2;
  if (name == "llama") return HfArch::llama;
  fail<ValueError>("unknown Hugging Face architecture '{}' (gpt2 or llama)", name);
}

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

namespace {

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json_file(const std::string& path) {
  const std::string text = read_file_text(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail<IoError>("{} is not JSON: {}", path, e.what());
  }
}

// config.json's keys with the defaults of transformers' config classes, so a
// file that leaves a key out means what it means to transformers.
class ConfigKeys {
 public:
  ConfigKeys(const json& j, std::string file) : j_(j), file_(std::move(file)) {}
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& at(const char* key) const { return j_.at(key); }
  int64_t integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_number_integer()) fail<ValueError>("{}: {} = {} is not an integer", file_, key, j_.at(key).dump());
    return j_.at(key).get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_number()) fail<ValueError>("{}: {} = {} is not a number", file_, key, j_.at(key).dump());
    return j_.at(key).get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail<ValueError>("{}: {} = {} is not true or false", file_, key, j_.at(key).dump());
    return j_.at(key).get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail<ValueError>("{}: {} = {} is not a string", file_, key, j_.at(key).dump());
    return j_.at(key).get<std::string>();
  }
  // A token id, or the first of a list of them (LLaMA 3 lists several ends).
  std::optional<int64_t> token(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = j_.at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
    fail<ValueError>("{}: {} = {} is not a token id", file_, key, v.dump());
  }
  const std::string& file() const { return file_; }

 private:
  const json& j_;
  std::string file_;
};

HfArch arch_of(const ConfigKeys& k) {
  const std::string model_type = k.text("model_type", "");
  if (k.has("architectures")) {
    const json& a = k.at("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string()) {
      fail<ValueError>("{}: architectures = {} is not a list of one name", k.file(), a.dump());
    }
    const std::string name = a[0].get<std::string>();
    HfArch arch;
    if (name == "GPT2LMHeadModel") arch = HfArch::gpt2;
    else if (name == "LlamaForCausalLM") arch = HfArch::llama;
    else fail<ValueError>("{}: architecture '{}' is not one braid reads (GPT2LMHeadModel, LlamaForCausalLM)", k.file(), name);
    if (!model_type.empty() && model_type != hf_arch_name(arch)) {
      fail<ValueError>("{}: architecture '{}' with model_type '{}' (expected '{}')", k.file(), name, model_type,
                       hf_arch_name(arch));
    }
    return arch;
  }
  if (model_type == "gpt2" || model_type == "llama") return parse_hf_arch(model_type);
  if (model_type.empty()) fail<ValueError>("{}: names neither architectures nor model_type", k.file());
  fail<ValueError>("{}: model_type '{}' is not one braid reads (gpt2, llama)", k.file(), model_type);
}

GptConfig gpt2_config(const ConfigKeys& k) {
  GptConfig c;
  c.vocab = k.integer("vocab_size", 50257);
  c.context = k.integer("n_positions", 1024);
  c.dim = k.integer("n_embd", 768);
  c.layers = k.integer("n_layer", 12);
  c.heads = k.integer("n_head", 12);
  c.hidden = k.integer("n_inner", 0);  // null: 4 x n_embd
  c.norm = nn::NormKind::layer;
  c.norm_eps = k.number("layer_norm_epsilon", 1e-5);
  c.position = Position::learned;
  const std::string act = k.text("activation_function", "gelu_new");
  // gelu_new, gelu_fast and gelu_pytorch_tanh are one formula, the tanh approximation.
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") c.activation = nn::MlpKind::gelu_tanh;
  else if (act == "gelu") c.activation = nn::MlpKind::gelu;
  else fail<ValueError>("{}: activation_function '{}' is not one braid implements (gelu_new, gelu)", k.file(), act);
  if (!k.boolean("scale_attn_weights", true)) {
    fail<ValueError>("{}: scale_attn_weights = false (unscaled attention) is not implemented", k.file());
  }
  if (k.boolean("scale_attn_by_inverse_layer_idx", false)) {
    fail<ValueError>("{}: scale_attn_by_inverse_layer_idx = true is not implemented", k.file());
  }
  if (k.boolean("add_cross_attention", false)) {
    fail<ValueError>("{}: add_cross_attention = true (an encoder-decoder GPT-2) is not implemented", k.file());
  }
  c.bias = true;
  c.tie_embeddings = k.boolean("tie_word_embeddings", true);
  c.init_std = k.number("initializer_range", 0.02);
  return c;
}

GptConfig llama_config(const ConfigKeys& k) {
  GptConfig c;
  c.vocab = k.integer("vocab_size", 32000);
  c.dim = k.integer("hidden_size", 4096);
  c.hidden = k.integer("intermediate_size", 11008);
  c.layers = k.integer("num_hidden_layers", 32);
  c.heads = k.integer("num_attention_heads", 32);
  c.kv_heads = k.integer("num_key_value_heads", c.heads);
  c.context = k.integer("max_position_embeddings", 2048);
  c.norm = nn::NormKind::rms;
  c.norm_eps = k.number("rms_norm_eps", 1e-6);
  c.position = Position::rope;
  c.activation = nn::MlpKind::swiglu;
  if (const std::string act = k.text("hidden_act", "silu"); act != "silu") {
    fail<ValueError>("{}: hidden_act '{}' is not implemented (braid's SwiGLU gates with silu)", k.file(), act);
  }
  // transformers 5 moves rope_theta (and the scaling) into rope_parameters.
  c.rope_theta = k.number("rope_theta", 10000);
  if (k.has("rope_parameters")) {
    const ConfigKeys rope(k.at("rope_parameters"), k.file() + " rope_parameters");
    c.rope_theta = rope.number("rope_theta", c.rope_theta);
    if (const std::string type = rope.text("rope_type", "default"); type != "default") {
      fail<ValueError>("{}: rope_type '{}' (scaled rotary positions) is not implemented", k.file(), type);
    }
  }
  if (k.has("rope_scaling")) {
    const json& s = k.at("rope_scaling");
    std::string type = s.dump();
    for (const char* key : {"rope_type", "type"}) {  // transformers spelled it both ways
      if (s.is_object() && s.contains(key) && s[key].is_string()) type = s[key].get<std::string>();
    }
    if (type != "default") fail<ValueError>("{}: rope_scaling {} is not implemented", k.file(), type);
  }
  if (k.has("head_dim") && k.integer("head_dim", 0) * c.heads != c.dim) {
    fail<ValueError>("{}: head_dim = {} is not hidden_size / num_attention_heads = {} / {}", k.file(),
                     k.integer("head_dim", 0), c.dim, c.heads);
  }
  const bool attention_bias = k.boolean("attention_bias", false), mlp_bias = k.boolean("mlp_bias", false);
  if (attention_bias != mlp_bias) {
    fail<ValueError>("{}: attention_bias = {} with mlp_bias = {}: braid's model.bias covers both", k.file(),
                     attention_bias, mlp_bias);
  }
  c.bias = attention_bias;
  c.tie_embeddings = k.boolean("tie_word_embeddings", false);
  c.init_std = k.number("initializer_range", 0.02);
  return c;
}

std::optional<DType> safetensors_dtype(const std::string& st) {
  static const std::map<std::string, DType> known = {{"F32", DType::f32}, {"F64", DType::f64}, {"F16", DType::f16},
                                                     {"BF16", DType::bf16}, {"I64", DType::i64}, {"I32", DType::i32},
                                                     {"U8", DType::u8},   {"BOOL", DType::b8}};
  auto it = known.find(st);
  return it == known.end() ? std::nullopt : std::optional(it->second);
}

// Every tensor of a safetensors file (a dtype braid lacks: undefined, refused
// only if the model needs it).
void read_tensors(const std::string& path, std::map<std::string, Tensor>& out) {
  safetensors::File f = safetensors::read(path);
  for (auto& [name, d] : f.tensors) {
    Tensor t;
    if (const auto dtype = safetensors_dtype(d.dtype)) {
      t = Tensor::empty(d.shape, *dtype);
      if (t.nbytes() != d.data.size()) fail<IoError>("{}: tensor '{}' has {} bytes for shape {}", path, name, d.data.size(), to_string(d.shape));
      std::copy(d.data.begin(), d.data.end(), static_cast<std::byte*>(t.raw_data()));
    }
    if (!out.emplace(name, t).second) fail<IoError>("{}: tensor '{}' is also in another file of the checkpoint", path, name);
    std::vector<std::byte>().swap(d.data);  // one copy of the bytes at a time
  }
}

// The tensors of `dir`: model.safetensors, or the files a sharded index names.
std::map<std::string, Tensor> read_checkpoint_tensors(const std::string& dir) {
  const fs::path d(dir);
  std::map<std::string, Tensor> tensors;
  if (fs::exists(d / "model.safetensors")) {
    read_tensors((d / "model.safetensors").string(), tensors);
    return tensors;
  }
  const fs::path index = d / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    if (fs::exists(d / "pytorch_model.bin")) {
      fail<IoError>("{} holds pytorch_model.bin, a pickle braid does not read: save it as safetensors "
                    "(transformers' save_pretrained(dir, safe_serialization=True))", dir);
    }
    fail<IoError>("{} has no model.safetensors nor model.safetensors.index.json", dir);
  }
  const json j = read_json_file(index.string());
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
    fail<IoError>("{} has no weight_map object", index.string());
  }
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail<IoError>("{}: weight_map['{}'] is not a file name", index.string(), name);
    by_file[file.get<std::string>()].push_back(name);
  }
  for (const auto& [file, names] : by_file) {
    const std::string path = (d / file).string();
    if (fs::path(file).filename() != fs::path(file)) fail<IoError>("{}: '{}' is not a file of the folder", index.string(), file);
    std::map<std::string, Tensor> part;
    read_tensors(path, part);
    for (const std::string& name : names) {
      if (!part.count(name)) fail<IoError>("{} lists tensor '{}' in {}, which lacks it", index.string(), name, path);
    }
    for (auto& [name, t] : part) {
      if (!tensors.emplace(name, t).second) fail<IoError>("{}: tensor '{}' is in two files", index.string(), name);
    }
  }
  return tensors;
}

json config_json(const GptConfig& c, HfArch arch, const HfSaveOptions& o) {
  auto token = [](const std::optional<int64_t>& id) { return id ? json(*id) : json(nullptr); };
  json j;
  if (arch == HfArch::gpt2) {
    j = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", c.vocab},
         {"n_positions", c.context},
         {"n_ctx", c.context},
         {"n_embd", c.dim},
         {"n_layer", c.layers},
         {"n_head", c.heads},
         {"n_inner", mlp_hidden(c) == 4 * c.dim ? json(nullptr) : json(mlp_hidden(c))},
         {"activation_function", c.activation == nn::MlpKind::gelu ? "gelu" : "gelu_new"},
         {"layer_norm_epsilon", c.norm_eps},
         // braid's dropout is GPT-2's three: embeddings, attention weights, residual branches.
         {"embd_pdrop", c.dropout},
         {"attn_pdrop", c.dropout},
         {"resid_pdrop", c.dropout},
         {"scale_attn_weights", true},
         {"tie_word_embeddings", c.tie_embeddings}};
  } else {
    j = {{"architectures", {"LlamaForCausalLM"}},
         {"model_type", "llama"},
         {"vocab_size", c.vocab},
         {"hidden_size", c.dim},
         {"intermediate_size", mlp_hidden(c)},
         {"num_hidden_layers", c.layers},
         {"num_attention_heads", c.heads},
         {"num_key_value_heads", c.kv_heads > 0 ? c.kv_heads : c.heads},
         {"head_dim", c.dim / c.heads},
         {"max_position_embeddings", c.context},
         {"rms_norm_eps", c.norm_eps},
         {"rope_theta", c.rope_theta},
         {"rope_scaling", nullptr},
         {"hidden_act", "silu"},
         {"attention_bias", c.bias},
         {"mlp_bias", c.bias},
         {"attention_dropout", c.dropout},  // LLaMA has no other dropout
         {"tie_word_embeddings", c.tie_embeddings}};
  }
  j["initializer_range"] = c.init_std;
  j["bos_token_id"] = token(o.bos);
  j["eos_token_id"] = token(o.eos);
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  return j;
}

const char* activation_name(nn::MlpKind a) {
  return a == nn::MlpKind::swiglu ? "swiglu" : a == nn::MlpKind::gelu ? "gelu" : "gelu_tanh";
}

}  // namespace

HfCheckpoint read_hf_config(const std::string& dir) {
  const std::string file = (fs::path(dir) / "config.json").string();
  if (!fs::is_directory(dir)) fail<IoError>("{} is not a folder (a Hugging Face checkpoint is a folder)", dir);
  if (!fs::exists(file)) fail<IoError>("{} has no config.json", dir);
  const json j = read_json_file(file);
  if (!j.is_object()) fail<IoError>("{} is not a JSON object", file);
  const ConfigKeys k(j, file);
  HfCheckpoint h;
  h.arch = arch_of(k);
  h.config = h.arch == HfArch::gpt2 ? gpt2_config(k) : llama_config(k);
  h.bos = k.token("bos_token_id");
  h.eos = k.token("eos_token_id");
  try {
    validate(h.config);
  } catch (const ConfigError& e) {
    fail<ValueError>("{}: {}", file, e.what());
  }
  return h;
}

HfCheckpoint read_hf(const std::string& dir) {
  HfCheckpoint h = read_hf_config(dir);
  h.state = from_hf_state(read_checkpoint_tensors(dir), h.config, h.arch, dir);
  return h;
}

HfModel load_hf(const std::string& dir) {
  HfCheckpoint h = read_hf(dir);
  Generator gen(0);
  HfModel m{.config = h.config, .arch = h.arch, .model = gpt(h.config, gen), .bos = h.bos, .eos = h.eos};
  m.model->load_state_dict(h.state);
  m.model->eval();
  return m;
}

void check_hf_arch(const GptConfig& c, HfArch arch) {
  auto refuse = [&](const char* field, const std::string& value, const char* needed) {
    fail<ConfigError>("a {} checkpoint cannot hold {} = {} (it needs {})", hf_arch_name(arch), field, value, needed);
  };
  const bool gqa = c.kv_heads > 0 && c.kv_heads != c.heads;
  if (arch == HfArch::gpt2) {
    if (c.norm != nn::NormKind::layer) refuse("norm", "rms", "layer");
    if (c.position != Position::learned) refuse("position", "rope", "learned");
    if (c.activation == nn::MlpKind::swiglu) refuse("activation", "swiglu", "gelu or gelu_tanh");
    if (!c.bias) refuse("bias", "false", "true");
    if (gqa) refuse("kv_heads", std::to_string(c.kv_heads), "kv_heads = heads");
  } else {
    if (c.norm != nn::NormKind::rms) refuse("norm", "layer", "rms");
    if (c.position != Position::rope) refuse("position", "learned", "rope");
    if (c.activation != nn::MlpKind::swiglu) refuse("activation", activation_name(c.activation), "swiglu");
  }
}

HfArch hf_arch_for(const GptConfig& c) {
  for (HfArch arch : {HfArch::llama, HfArch::gpt2}) {
    try {
      check_hf_arch(c, arch);
      return arch;
    } catch (const ConfigError&) {
    }
  }
  fail<ConfigError>("a gpt with norm = {}, position = {}, activation = {}, bias = {}, kv_heads = {} fits neither "
                    "GPT-2 (layer, learned, gelu or gelu_tanh, biases, kv_heads = heads) nor LLaMA (rms, rope, swiglu)",
                    c.norm == nn::NormKind::rms ? "rms" : "layer", c.position == Position::rope ? "rope" : "learned",
                    activation_name(c.activation), c.bias, c.kv_heads);
}

void save_hf(const nn::Module& model, const GptConfig& config, const std::string& dir, HfArch arch,
             const HfSaveOptions& options) {
  validate(config);
  const std::map<std::string, Tensor> hf = to_hf_state(model.state_dict(), config, arch);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail<IoError>("cannot create {}: {}", dir, ec.message());
  std::map<std::string, safetensors::TensorRef> refs;
  for (const auto& [name, t] : hf) {
    refs[name] = {"F32", t.shape(), {static_cast<const std::byte*>(t.raw_data()), t.nbytes()}};
  }
  // transformers refuses a safetensors file whose metadata lacks format "pt".
  safetensors::write((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});
  const std::string text = config_json(config, arch, options).dump(2) + "\n";
  write_file_atomic((fs::path(dir) / "config.json").string(),
                    {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

}  // namespace braid::models
