// The tensor layout of GPT2LMHeadModel and LlamaForCausalLM against gpt()'s
// state_dict: one table, read both ways (import concatenates an entry's
// pieces, export splits the braid tensor into them).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>

#include "braid/base/error.h"
#include "braid/models/hf_checkpoint.h"

namespace braid::models {

namespace {

constexpr std::string_view kGpt2Prefix = "transformer.";

// One HF tensor as stored: its name (GPT-2's without "transformer."), its
// shape, and whether it holds the transpose of braid's rows (Conv1D: [in, out]).
struct HfPiece {
  std::string hf;
  Shape shape;
  bool transposed = false;
  int64_t rows() const { return transposed ? shape[1] : shape[0]; }
};

// A braid tensor and the pieces whose rows, in order, make it.
struct HfEntry {
  std::string braid;
  Shape shape;
  std::vector<HfPiece> pieces;
};

std::vector<HfEntry> hf_layout(const GptConfig& c, HfArch arch) {
  const int64_t d = c.dim, v = c.vocab, l = c.layers, h = c.heads, kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  const int64_t hd = c.dim / c.heads, f = mlp_hidden(c);
  std::vector<HfEntry> e;
  auto one = [&](std::string braid, std::string hf, Shape shape, bool transposed = false) {
    Shape mine = transposed ? Shape{shape[1], shape[0]} : shape;
    e.push_back({std::move(braid), std::move(mine), {{std::move(hf), std::move(shape), transposed}}});
  };
  const std::string final_norm = std::to_string(l + 1) + ".", head = std::to_string(l + 2) + ".weight";
  if (arch == HfArch::gpt2) {
    one("0.tok.weight", "wte.weight", {v, d});
    one("0.pos", "wpe.weight", {c.context, d});
    for (int64_t i = 0; i < l; ++i) {
      const std::string p = fmt::format("h.{}.", i), b = fmt::format("{}.", i + 1);
      one(b + "ln1.weight", p + "ln_1.weight", {d});
      one(b + "ln1.bias", p + "ln_1.bias", {d});
      one(b + "attn.in_proj.weight", p + "attn.c_attn.weight", {d, 3 * d}, true);
      one(b + "attn.in_proj.bias", p + "attn.c_attn.bias", {3 * d});
      one(b + "attn.out_proj.weight", p + "attn.c_proj.weight", {d, d}, true);
      one(b + "attn.out_proj.bias", p + "attn.c_proj.bias", {d});
      one(b + "ln2.weight", p + "ln_2.weight", {d});
      one(b + "ln2.bias", p + "ln_2.bias", {d});
      one(b + "fc1.weight", p + "mlp.c_fc.weight", {d, f}, true);
      one(b + "fc1.bias", p + "mlp.c_fc.bias", {f});
      one(b + "fc2.weight", p + "mlp.c_proj.weight", {f, d}, true);
      one(b + "fc2.bias", p + "mlp.c_proj.bias", {d});
    }
    one(final_norm + "weight", "ln_f.weight", {d});
    one(final_norm + "bias", "ln_f.bias", {d});
  } else {
    one("0.tok.weight", "model.embed_tokens.weight", {v, d});
    for (int64_t i = 0; i < l; ++i) {
      const std::string p = fmt::format("model.layers.{}.", i), b = fmt::format("{}.", i + 1);
      const std::string a = p + "self_attn.", m = p + "mlp.";
      one(b + "ln1.weight", p + "input_layernorm.weight", {d});
      e.push_back({b + "attn.in_proj.weight",
                   {(h + 2 * kv) * hd, d},
                   {{a + "q_proj.weight", {h * hd, d}}, {a + "k_proj.weight", {kv * hd, d}},
                    {a + "v_proj.weight", {kv * hd, d}}}});
      if (c.bias) {
        e.push_back({b + "attn.in_proj.bias",
                     {(h + 2 * kv) * hd},
                     {{a + "q_proj.bias", {h * hd}}, {a + "k_proj.bias", {kv * hd}}, {a + "v_proj.bias", {kv * hd}}}});
      }
      one(b + "attn.out_proj.weight", a + "o_proj.weight", {d, h * hd});
      if (c.bias) one(b + "attn.out_proj.bias", a + "o_proj.bias", {d});
      one(b + "ln2.weight", p + "post_attention_layernorm.weight", {d});
      // SwiGLU: fc1's rows are [gate; up] (silu(gate) * up).
      e.push_back({b + "fc1.weight", {2 * f, d}, {{m + "gate_proj.weight", {f, d}}, {m + "up_proj.weight", {f, d}}}});
      if (c.bias) e.push_back({b + "fc1.bias", {2 * f}, {{m + "gate_proj.bias", {f}}, {m + "up_proj.bias", {f}}}});
      one(b + "fc2.weight", m + "down_proj.weight", {d, f});
      if (c.bias) one(b + "fc2.bias", m + "down_proj.bias", {d});
    }
    one(final_norm + "weight", "model.norm.weight", {d});
  }
  if (!c.tie_embeddings) one(head, "lm_head.weight", {v, d});
  return e;
}

// HF tensors that carry nothing braid needs: GPT-2's causal-mask buffers,
// LLaMA's rotary frequencies (recomputed from rope_theta), and the head of a
// tied model (transformers ties it to the embedding whatever the file says).
bool ignorable(const std::string& name, const GptConfig& c, HfArch arch) {
  static const std::regex gpt2_mask(R"(h\.\d+\.attn\.(bias|masked_bias))");
  static const std::regex llama_rotary(R"(model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq)");
  if (c.tie_embeddings && name == "lm_head.weight") return true;
  return std::regex_match(name, arch == HfArch::gpt2 ? gpt2_mask : llama_rotary);
}

Tensor to_host_f32(const Tensor& t) { return t.detach().to(Device::cpu).to(DType::f32).contiguous(); }

// [r, c] -> [c, r] (f32, contiguous).
Tensor transpose_f32(const Tensor& t) {
  const int64_t r = t.size(0), c = t.size(1);
  Tensor out = Tensor::empty({c, r});
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) dst[j * r + i] = src[i * c + j];
  }
  return out;
}

// Rows [begin, begin + n) of a contiguous f32 tensor (1-D: elements).
Tensor row_range(const Tensor& t, int64_t begin, int64_t n) {
  Shape s = t.shape();
  const int64_t row = t.numel() / s[0];
  s[0] = n;
  Tensor out = Tensor::empty(s);
  std::memcpy(out.data<float>(), t.data<float>() + begin * row, static_cast<size_t>(n * row) * sizeof(float));
  return out;
}

std::string gpt2_spelling(const std::string& hf, bool prefixed) {
  return prefixed && !hf.starts_with("lm_head.") ? std::string(kGpt2Prefix) + hf : hf;
}

}  // namespace

std::map<std::string, std::vector<std::string>> hf_sources(const GptConfig& c, HfArch arch) {
  std::map<std::string, std::vector<std::string>> out;
  for (const HfEntry& e : hf_layout(c, arch)) {
    for (const HfPiece& p : e.pieces) out[e.braid].push_back(arch == HfArch::gpt2 ? gpt2_spelling(p.hf, true) : p.hf);
  }
  return out;
}

std::map<std::string, Tensor> to_hf_state(const nn::NamedTensors& state, const GptConfig& c, HfArch arch) {
  check_hf_arch(c, arch);
  std::map<std::string, Tensor> given(state.begin(), state.end());
  std::map<std::string, Tensor> out;
  for (const HfEntry& e : hf_layout(c, arch)) {
    auto it = given.find(e.braid);
    if (it == given.end()) fail<ValueError>("to_hf_state: the model has no tensor '{}'", e.braid);
    if (it->second.shape() != e.shape) {
      fail<ValueError>("to_hf_state: '{}' has shape {} in the model; the config gives {}", e.braid,
                       to_string(it->second.shape()), to_string(e.shape));
    }
    const Tensor t = to_host_f32(it->second);
    given.erase(it);
    int64_t at = 0;
    for (const HfPiece& p : e.pieces) {
      Tensor part = e.pieces.size() == 1 ? t : row_range(t, at, p.rows());
      at += p.rows();
      out[arch == HfArch::gpt2 ? gpt2_spelling(p.hf, true) : p.hf] = p.transposed ? transpose_f32(part) : part;
    }
  }
  if (!given.empty()) {
    fail<ValueError>("to_hf_state: the model's tensor '{}' has no place in a {} of this config", given.begin()->first,
                     hf_arch_name(arch));
  }
  return out;
}

nn::NamedTensors from_hf_state(const std::map<std::string, Tensor>& hf, const GptConfig& c, HfArch arch,
                               const std::string& where) {
  // GPT-2 names with or without "transformer." (GPT2LMHeadModel's own
  // save_pretrained writes it; the published files do not).
  std::map<std::string, std::pair<std::string, Tensor>> found;  // unprefixed -> (as spelled, tensor)
  bool prefixed = false;
  for (const auto& [name, t] : hf) {
    std::string key = name;
    if (arch == HfArch::gpt2 && name.starts_with(kGpt2Prefix)) {
      key = name.substr(kGpt2Prefix.size());
      prefixed = true;
    }
    if (!found.emplace(key, std::make_pair(name, t)).second) {
      fail<ValueError>("{}: tensor '{}' is there twice, with and without the 'transformer.' prefix", where, key);
    }
  }
  nn::NamedTensors out;
  for (const HfEntry& e : hf_layout(c, arch)) {
    std::vector<Tensor> parts;
    for (const HfPiece& p : e.pieces) {
      auto it = found.find(p.hf);
      const std::string spelled = arch == HfArch::gpt2 ? gpt2_spelling(p.hf, prefixed) : p.hf;
      if (it == found.end()) {
        fail<ValueError>("{}: tensor '{}' is missing (a {} of {} layers{} has it)", where, spelled,
                         hf_arch_name(arch), c.layers, c.tie_embeddings ? "" : " with an untied head");
      }
      const Tensor& t = it->second.second;
      if (!t.defined()) fail<ValueError>("{}: tensor '{}' has a dtype braid does not read", where, spelled);
      if (t.shape() != p.shape) {
        fail<ValueError>("{}: tensor '{}' has shape {} in the checkpoint; config.json gives {}", where, spelled,
                         to_string(t.shape()), to_string(p.shape));
      }
      const Tensor f = to_host_f32(t);
      parts.push_back(p.transposed ? transpose_f32(f) : f);
      found.erase(it);
    }
    if (parts.size() == 1) {
      out.emplace_back(e.braid, parts[0]);
      continue;
    }
    Tensor whole = Tensor::empty(e.shape);
    float* dst = whole.data<float>();
    for (const Tensor& p : parts) dst = std::copy_n(p.data<float>(), p.numel(), dst);
    out.emplace_back(e.braid, whole);
  }
  for (const auto& [key, spelled_tensor] : found) {
    if (ignorable(key, c, arch)) continue;
    fail<ValueError>("{}: unexpected tensor '{}' (not part of a {} of {} layers{})", where, spelled_tensor.first,
                     hf_arch_name(arch), c.layers, c.tie_embeddings ? " with a tied head" : "");
  }
  return out;
}

}  // namespace braid::models
