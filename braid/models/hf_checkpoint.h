// Hugging Face checkpoints of the gpt family: a folder with config.json and
// model.safetensors (or a sharded model.safetensors.index.json) as
// `transformers` writes and loads it, for two architectures:
//
//   GPT2LMHeadModel   layer norm, learned positions, GELU (tanh), biases, tied head
//   LlamaForCausalLM  RMSNorm, rotary positions, SwiGLU, grouped-query attention,
//                     no biases, tied or untied head
//
//   HfModel m = load_hf("gpt2/");                        // config + braid model
//   save_hf(*m.model, m.config, "out/", HfArch::llama);  // refused: GPT-2 is no LLaMA
//
// Where the layouts differ (hf_names.cc): GPT-2's Conv1D stores weights as
// [in, out], braid's Linear as [out, in]; braid packs attention's q, k, v into
// one in_proj (rows [q: H heads | k: KV heads | v: KV heads] x head_dim) that
// LLaMA keeps as three projections; braid's SwiGLU fc1 is LLaMA's [gate; up].
// HF's LLaMA rotates q and k in the rotate-half layout braid uses (pairs i and
// i + head_dim/2), so their rows map without permutation. Published GPT-2
// files omit the "transformer." prefix and keep the attention-mask buffers
// h.N.attn.bias / masked_bias; older LLaMA files keep rotary_emb.inv_freq:
// both spellings are read and the buffers ignored.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/models/gpt.h"
#include "braid/nn/module.h"

namespace braid::models {

enum class HfArch { gpt2, llama };

// "gpt2" / "llama" (the model_type); parse_hf_arch refuses anything else by name.
const char* hf_arch_name(HfArch arch);
HfArch parse_hf_arch(std::string_view name);

// A checkpoint read into braid's layout.
struct HfCheckpoint {
  GptConfig config;         // dropout 0 (inference); context = n_positions / max_position_embeddings
  HfArch arch = HfArch::gpt2;
  nn::NamedTensors state;   // the names and layouts of gpt(config)'s state_dict, f32
  std::optional<int64_t> bos, eos;  // config.json's token ids, when given as one id
};

struct HfModel {
  GptConfig config;
  HfArch arch = HfArch::gpt2;
  std::shared_ptr<nn::Sequential> model;
  std::optional<int64_t> bos, eos;
};

// A folder holding config.json.
bool is_hf_folder(const std::string& path);

// config.json of `dir` as a GptConfig. ValueError naming the file and the
// architecture, model_type or setting braid does not implement (rope_scaling,
// an activation other than GELU/SiLU, attention scaled by layer index, ...).
HfCheckpoint read_hf_config(const std::string& dir);
// config.json and every tensor. ValueError naming the file and the tensor
// that is missing, unexpected, or shaped otherwise than config.json implies
// (with both shapes); IoError for a missing or broken file.
HfCheckpoint read_hf(const std::string& dir);
HfModel load_hf(const std::string& dir);

// The architecture whose layout holds `c`: llama for RMSNorm + rotary + SwiGLU,
// gpt2 for layer norm + learned positions + GELU; ConfigError naming the
// fields that fit neither.
HfArch hf_arch_for(const GptConfig& c);
// ConfigError naming the first field of `c` that `arch` cannot hold.
void check_hf_arch(const GptConfig& c, HfArch arch);

struct HfSaveOptions {
  std::optional<int64_t> bos, eos;  // config.json's token ids (null when unset)
};

// Writes config.json and model.safetensors (f32, metadata format "pt") into
// `dir` (created if missing), each replaced atomically; transformers'
// from_pretrained loads the folder. The model is gpt(config)'s layout.
void save_hf(const nn::Module& model, const GptConfig& config, const std::string& dir, HfArch arch,
             const HfSaveOptions& options = {});

// The name mapping, both ways (hf_names.cc). to_hf_state: braid state ->
// HF tensors (HF names, with GPT-2's "transformer." prefix; a tied head
// omitted). from_hf_state: HF tensors (either GPT-2 spelling) -> braid state;
// `where` names the source in errors.
std::map<std::string, Tensor> to_hf_state(const nn::NamedTensors& state, const GptConfig& c, HfArch arch);
nn::NamedTensors from_hf_state(const std::map<std::string, Tensor>& hf, const GptConfig& c, HfArch arch,
                               const std::string& where);

// Where each braid tensor comes from: its braid name -> the HF names it is
// assembled from (rows concatenated), for messages such as a shape mismatch
// in `braid train --set train.init=`.
std::map<std::string, std::vector<std::string>> hf_sources(const GptConfig& c, HfArch arch);

}  // namespace braid::models
