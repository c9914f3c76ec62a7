#include "braid/train/pretrained.h"

#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "braid/base/error.h"
#include "braid/train/checkpoint_info.h"
#include "braid/train/model_families.h"
#include "braid/train/schema.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

// A run's out_dir (its newest complete step), or one step's file or stem.
Checkpoint load_braid_checkpoint(const std::string& path, std::string* dir) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    *dir = path;
    return load_whole_checkpoint(path);
  }
  const fs::path p(path);
  std::string name = p.filename().string();
  for (const char* ext : {".safetensors", ".json"}) {
    if (name.ends_with(ext)) name.resize(name.size() - std::string_view(ext).size());
  }
  const bool stem = name.size() == 13 && name.starts_with("ckpt-") &&
                    std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!stem || !fs::exists(p.parent_path() / (name + ".json"), ec)) {
    fail<IoError>("{} is neither a Hugging Face folder (with config.json) nor a braid checkpoint (a run's out_dir, "
                  "or its ckpt-N.safetensors)", path);
  }
  *dir = p.parent_path().empty() ? "." : p.parent_path().string();
  return load_whole_checkpoint(*dir, std::stoll(name.substr(5)));
}

Config checkpoint_config(const Checkpoint& ckpt, const std::string& where) {
  Config cfg(braid_schema());
  cfg.load_json(ckpt.config, where);
  return cfg;
}

int64_t vocab_of(const nn::NamedTensors& state, const std::string& where) {
  for (const auto& [n, t] : state) {
    if (n == "0.tok.weight" && t.ndim() == 2) return t.size(0);
  }
  fail<ConfigError>("{} has no token embedding '0.tok.weight': not a language model", where);
}

struct Rebuilt {
  std::shared_ptr<nn::Sequential> model;
  std::optional<models::GptConfig> gpt;
  int64_t context = 0, vocab = 0;
};

// The model a braid checkpoint's config builds (its weights not yet loaded).
Rebuilt rebuild(const Config& cfg, const nn::NamedTensors& state, const std::string& where) {
  const std::string& name = cfg.get_string("model.name");
  if (name != "gpt" && name != "char_transformer") {
    fail<ConfigError>("{} holds a model.name = {}, not a language model (gpt, char_transformer)", where, name);
  }
  Rebuilt r;
  r.vocab = vocab_of(state, where);
  r.context = cfg.get_int("model.context");
  const ModelInfo info{.input_shape = {r.context}, .classes = r.vocab};
  Generator gen(0);
  r.model = std::dynamic_pointer_cast<nn::Sequential>(build_model(cfg, info, gen));
  if (!r.model) fail<ConfigError>("{}: model.name = {} did not build a Sequential", where, name);
  if (name == "gpt") r.gpt = gpt_config(cfg, info);
  return r;
}

const char* activation_text(nn::MlpKind a) {
  return a == nn::MlpKind::swiglu ? "swiglu" : a == nn::MlpKind::gelu ? "gelu" : "gelu_tanh";
}

// What no tensor's shape shows: the head count, the norm's epsilon, the
// rotary base, the activation.
void compare_gpt(const models::GptConfig& from, const models::GptConfig& run, const std::string& what) {
  auto differ = [&](const char* key, const std::string& a, const std::string& b) {
    fail<ConfigError>("{}: the checkpoint's model has {} = {}, the run's {} = {}", what, key, a, key, b);
  };
  if (from.heads != run.heads) differ("model.n_heads", std::to_string(from.heads), std::to_string(run.heads));
  if (std::abs(from.norm_eps - run.norm_eps) > 1e-6 * std::abs(run.norm_eps)) {
    differ("model.norm_eps", fmt::format("{}", from.norm_eps), fmt::format("{}", run.norm_eps));
  }
  if (from.position == models::Position::rope && run.position == models::Position::rope &&
      from.rope_theta != run.rope_theta) {
    differ("model.rope_theta", fmt::format("{}", from.rope_theta), fmt::format("{}", run.rope_theta));
  }
  if (from.activation != run.activation) {
    differ("model.activation", activation_text(from.activation), activation_text(run.activation));
  }
}

// load_state_dict, with errors that say where a tensor came from.
void copy_state(nn::Module& model, const nn::NamedTensors& state, const std::string& what,
                const std::map<std::string, std::vector<std::string>>& sources) {
  auto origin = [&](const std::string& n) {
    auto it = sources.find(n);
    return it == sources.end() ? fmt::format("'{}'", n) : fmt::format("'{}' ({})", n, fmt::join(it->second, " + "));
  };
  std::map<std::string, Tensor> given(state.begin(), state.end());
  for (const auto& [n, t] : model.state_dict()) {
    auto it = given.find(n);
    if (it == given.end()) {
      fail<ValueError>("{}: the run's model has tensor '{}' {}, which the checkpoint lacks", what, n,
                       to_string(t.shape()));
    }
    if (it->second.shape() != t.shape()) {
      fail<ValueError>("{}: tensor {} has shape {} in the checkpoint, {} in the run's model", what, origin(n),
                       to_string(it->second.shape()), to_string(t.shape()));
    }
    given.erase(it);
  }
  if (!given.empty()) {
    fail<ValueError>("{}: the checkpoint's tensor {} {} has no place in the run's model", what,
                     origin(given.begin()->first), to_string(given.begin()->second.shape()));
  }
  model.load_state_dict(state);
}

}  // namespace

std::string tokenizer_at(const std::string& path) {
  std::error_code ec;
  const fs::path d(path);
  if (!fs::is_directory(d, ec)) return "";
  if (fs::is_regular_file(d / "tokenizer.json", ec)) return (d / "tokenizer.json").string();
  if (fs::is_regular_file(d / "vocab.json", ec) && fs::is_regular_file(d / "merges.txt", ec)) return path;
  return "";
}

Pretrained load_pretrained(const std::string& path) {
  Pretrained p;
  if (models::is_hf_folder(path)) {
    models::HfModel m = models::load_hf(path);
    p.model = m.model;
    p.gpt = m.config;
    p.context = m.config.context;
    p.vocab = m.config.vocab;
    p.hf_arch = m.arch;
    p.eos = m.eos;
    p.description = fmt::format("Hugging Face {} folder {}", models::hf_arch_name(m.arch), path);
    p.tokenizer = tokenizer_at(path);
    return p;
  }
  std::string dir;
  const Checkpoint ckpt = load_braid_checkpoint(path, &dir);
  p.description = fmt::format("braid checkpoint {}, step {}", dir, ckpt.step);
  const Config cfg = checkpoint_config(ckpt, p.description);
  Rebuilt r = rebuild(cfg, ckpt.model, p.description);
  r.model->load_state_dict(ckpt.model);
  r.model->eval();
  p.model = r.model;
  p.gpt = r.gpt;
  p.context = r.context;
  p.vocab = r.vocab;
  p.tokenizer = tokenizer_at(dir);
  if (p.tokenizer.empty() && cfg.get_string("data.name") == "tokens") {
    p.tokenizer = tokenizer_at(fs::path(cfg.get_string("data.path")).parent_path().string());
  }
  return p;
}

void init_model(nn::Module& model, const std::string& path, const Config& c, const ModelInfo& info) {
  const std::string what = fmt::format("train.init = {}", path);
  const std::string& name = c.get_string("model.name");
  if (models::is_hf_folder(path)) {
    if (name != "gpt") {
      fail<ConfigError>("{} is a Hugging Face folder, which initialises model.name = gpt, not {}", what, name);
    }
    const models::HfCheckpoint h = models::read_hf(path);
    compare_gpt(h.config, gpt_config(c, info), what);
    copy_state(model, h.state, what, models::hf_sources(h.config, h.arch));
    return;
  }
  std::string dir;
  const Checkpoint ckpt = load_braid_checkpoint(path, &dir);
  if (name == "gpt") {
    const Config cfg = checkpoint_config(ckpt, what);
    if (cfg.get_string("model.name") == "gpt") {
      const ModelInfo from{.input_shape = {cfg.get_int("model.context")}, .classes = vocab_of(ckpt.model, what)};
      compare_gpt(gpt_config(cfg, from), gpt_config(c, info), what);
    }
  }
  copy_state(model, ckpt.model, what, {});
}

}  // namespace braid::train
