// `braid export --hf OUT [--arch auto|gpt2|llama] [--tokenizer PATH] MODEL`
// Writes a gpt (a braid run's out_dir or checkpoint, or a Hugging Face
// folder) as a Hugging Face folder that transformers' from_pretrained loads:
// config.json and model.safetensors (braid/models/hf_checkpoint.h), and the
// tokenizer the model goes with (train/pretrained.h says where it is looked
// for; --tokenizer names one) with a tokenizer_config.json, so the folder is
// complete for AutoTokenizer too.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/models/hf_checkpoint.h"
#include "braid/text/formats.h"
#include "braid/train/pretrained.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string hf;
  std::string arch = "auto";
  std::string tokenizer;
  std::string model;
};

void write_text_file(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

// Copies the tokenizer's own files (byte for byte: what was trained is what
// ships) and writes a tokenizer_config.json naming the generic fast
// tokenizer, which reads tokenizer.json as it is.
std::vector<std::string> copy_tokenizer(const std::string& from, const text::Tokenizer& t, const fs::path& out,
                                        int64_t context) {
  std::vector<std::string> written;
  const fs::path src(from);
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt"}) {
      if (!fs::is_regular_file(src / name, ec)) continue;
      fs::copy_file(src / name, out / name, fs::copy_options::overwrite_existing, ec);
      if (ec) fail<IoError>("export: cannot copy {} to {}: {}", (src / name).string(), out.string(), ec.message());
      written.push_back(name);
    }
  } else {
    fs::copy_file(src, out / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    if (ec) fail<IoError>("export: cannot copy {} to {}: {}", from, out.string(), ec.message());
    written.push_back("tokenizer.json");
  }
  if (std::find(written.begin(), written.end(), "tokenizer.json") == written.end()) {
    write_text_file(out / "tokenizer.json", text::to_tokenizer_json(t));  // a vocab.json + merges.txt pair
    written.push_back("tokenizer.json");
  }
  nlohmann::json config{{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", context}};
  if (t.token_to_id("<|endoftext|>")) {
    for (const char* role : {"bos_token", "eos_token", "unk_token"}) config[role] = "<|endoftext|>";
  }
  write_text_file(out / "tokenizer_config.json", config.dump(2) + "\n");
  written.push_back("tokenizer_config.json");
  return written;
}

void run_export(const ExportArgs& a) {
  const train::Pretrained p = train::load_pretrained(a.model);
  if (!p.gpt) fail<ConfigError>("export: {} is not a model.name = gpt model; only gpt models export", p.description);
  models::HfArch arch;
  if (a.arch != "auto") {
    arch = models::parse_hf_arch(a.arch);
    models::check_hf_arch(*p.gpt, arch);
  } else {
    arch = p.hf_arch ? *p.hf_arch : models::hf_arch_for(*p.gpt);
  }
  const std::string tok_path = a.tokenizer.empty() ? p.tokenizer : a.tokenizer;
  std::optional<text::Tokenizer> tok;
  models::HfSaveOptions options;
  if (p.eos) options.eos = options.bos = p.eos;
  if (!tok_path.empty()) {
    tok = text::load_tokenizer(tok_path);
    if (tok->vocab_size() > p.vocab) {
      fail<ConfigError>("export: the tokenizer {} has {} ids, more than the model's vocabulary of {}", tok_path,
                        tok->vocab_size(), p.vocab);
    }
    if (!options.eos) {
      if (auto end = tok->token_to_id("<|endoftext|>")) options.eos = options.bos = *end;
    }
  }
  models::save_hf(*p.model, *p.gpt, a.hf, arch, options);
  std::vector<std::string> files = {"config.json", "model.safetensors"};
  if (tok) {
    for (std::string& f : copy_tokenizer(tok_path, *tok, a.hf, p.context)) files.push_back(std::move(f));
  }
  std::printf("exported %s as a Hugging Face %s model (%lld parameters) to %s: %s%s\n", p.description.c_str(),
              models::hf_arch_name(arch), static_cast<long long>(p.model->num_parameters()), a.hf.c_str(),
              fmt::format("{}", fmt::join(files, ", ")).c_str(),
              tok ? "" : " (no tokenizer found with the model: --tokenizer adds one)");
}

}  // namespace

void add_export(CLI::App& app) {
  static ExportArgs a;
  auto* cmd = app.add_subcommand("export", "Write a gpt as a Hugging Face folder transformers loads (docs/models.md)");
  cmd->add_option("--hf", a.hf, "Output folder (config.json, model.safetensors, the tokenizer)")->required();
  cmd->add_option("--arch", a.arch, "gpt2, llama, or auto (the layout the model's config fits)")
      ->check(CLI::IsMember({"auto", "gpt2", "llama"}));
  cmd->add_option("--tokenizer", a.tokenizer, "tokenizer.json, or a folder with it or vocab.json + merges.txt");
  cmd->add_option("model", a.model, "A braid run's out_dir, its ckpt-N.safetensors, or a Hugging Face folder")
      ->required();
  cmd->callback([] { run_export(a); });
}

}  // namespace braid::cli
