// The decoder-only transformer family: GPT-2 (Radford et al., 2019) and
// LLaMA-style models (Touvron et al., 2023) from one typed config.
//
//   GptConfig c{.vocab = 50257, .context = 1024, .layers = 12, .heads = 12, .dim = 768};
//   auto model = models::gpt(c, gen);           // nn::Sequential
//   Tensor logits = model->forward(tokens);     // [B, T] i64 -> [B, T, vocab]
//
// The model is a Sequential of L + 3 layers, named as torch.nn.Sequential
// names them: "0" the token (+ learned position) embedding, "1" ... "L" the
// pre-norm blocks (nn::TransformerBlock), "L+1" the final norm, "L+2" the head
// (a Linear without bias, or nn::TiedHead reading the embedding table). So a
// pipeline cuts it between blocks and tensor parallelism rewrites its blocks,
// as for any braid transformer. Weights are drawn as GPT-2 draws them: every
// weight N(0, 0.02), biases 0, norms 1, and the projections that end a
// residual branch (attention's out_proj, the MLP's fc2) N(0, 0.02 / sqrt(2 L)).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/nn/attention.h"
#include "braid/nn/sequential.h"

namespace braid::models {

enum class Position { learned, rope };

struct GptConfig {
  int64_t vocab = 0;
  int64_t context = 1024;       // the longest sequence (learned positions: their count)
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t kv_heads = 0;         // 0: heads; fewer: grouped-query attention
  int64_t dim = 768;
  double mlp_ratio = 4;         // MLP width = mlp_ratio x dim, unless hidden is set
  int64_t hidden = 0;
  nn::NormKind norm = nn::NormKind::layer;
  double norm_eps = 1e-5;
  Position position = Position::learned;
  double rope_theta = 10000;
  nn::MlpKind activation = nn::MlpKind::gelu_tanh;
  bool bias = true;             // of every linear layer (not the head)
  bool tie_embeddings = true;   // the head reads the token embedding table
  double dropout = 0;           // embeddings, attention weights, residual branches
  Generator* dropout_generator = nullptr;
  double init_std = 0.02;
  // experts > 0: every moe.every-th block's MLP is a mixture of experts
  // (nn/moe.h; each expert of the MLP's width and activation).
  nn::MoeOptions moe{};
};

// Refuses a config that cannot be built (names the field and the values).
void validate(const GptConfig& c);
// The MLP width a config gives.
int64_t mlp_hidden(const GptConfig& c);
std::shared_ptr<nn::Sequential> gpt(const GptConfig& c, Generator& gen);

// Training FLOPs per token: 6 x parameters (forward and backward through every
// weight; the tied table counted once, as its head use) + 12 x layers x dim x
// context for the attention scores and their weighted sum (causal masking not
// discounted: the estimate of the PaLM paper's MFU).
double training_flops_per_token(const GptConfig& c, int64_t parameters);

// Runs a gpt Sequential with key-value caches: the prompt's prefill once, then
// one position per generated token.
class Decoder {
 public:
  // capacity: the most positions a sequence reaches (<= the model's context
  // with learned positions).
  Decoder(nn::Sequential& model, int64_t capacity);
  // tokens [B, T] at the next T positions -> logits [B, T, vocab].
  Tensor forward(const Tensor& tokens);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }

 private:
  nn::Sequential& model_;
  int64_t capacity_, length_ = 0;
  std::vector<nn::KVCache> caches_;
};

struct SampleOptions {
  double temperature = 1;  // 0: greedy
  int64_t top_k = 0;       // 0: every token
  double top_p = 1;        // nucleus: the fewest tokens whose probability reaches top_p
};

// A token id drawn from logits [vocab] (f32, any device: copied to the host).
int64_t sample_token(const Tensor& logits, const SampleOptions& options, Generator& gen);

// prompt -> prompt + up to `tokens` new ids, sampled with a KV cache (batch 1).
// Stops early at `stop` (>= 0) once generated.
std::vector<int64_t> generate(nn::Sequential& model, const std::vector<int64_t>& prompt, int64_t tokens,
                              int64_t capacity, const SampleOptions& options, Generator& gen, int64_t stop = -1);

}  // namespace braid::models
