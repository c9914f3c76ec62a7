#include "braid/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/autograd/node.h"
#include "braid/nn/init.h"
#include "braid/nn/linear.h"
#include "braid/ops/shape.h"

namespace braid::models {

void validate(const GptConfig& c) {
  auto positive = [](const char* what, int64_t v) {
    if (v <= 0) fail<ConfigError>("gpt: {} must be positive, got {}", what, v);
  };
  positive("vocab", c.vocab);
  positive("context", c.context);
  positive("layers", c.layers);
  positive("heads", c.heads);
  positive("dim", c.dim);
  if (c.dim % c.heads != 0) fail<ConfigError>("gpt: heads = {} must divide dim = {}", c.heads, c.dim);
  const int64_t kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  if (c.kv_heads < 0 || c.heads % kv != 0) {
    fail<ConfigError>("gpt: kv_heads = {} must divide heads = {}", c.kv_heads, c.heads);
  }
  if (c.position == Position::rope && (c.dim / c.heads) % 2 != 0) {
    fail<ConfigError>("gpt: rotary positions need an even head dim, dim / heads = {}", c.dim / c.heads);
  }
  if (c.hidden < 0 || (c.hidden == 0 && !(c.mlp_ratio > 0))) {
    fail<ConfigError>("gpt: the MLP width must be positive (hidden = {}, mlp_ratio = {})", c.hidden, c.mlp_ratio);
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) fail<ConfigError>("gpt: dropout must lie in [0, 1), got {}", c.dropout);
  if (!(c.rope_theta > 0)) fail<ConfigError>("gpt: rope_theta must be positive, got {}", c.rope_theta);
  if (c.moe.experts > 0) {
    if (c.moe.top_k < 1 || c.moe.top_k > c.moe.experts) {
      fail<ConfigError>("gpt: moe.top_k = {} must lie in 1..moe.experts = {}", c.moe.top_k, c.moe.experts);
    }
    if (c.moe.every < 1) fail<ConfigError>("gpt: moe.every must be positive, got {}", c.moe.every);
  }
}

int64_t mlp_hidden(const GptConfig& c) {
  return c.hidden > 0 ? c.hidden : static_cast<int64_t>(std::llround(c.mlp_ratio * static_cast<double>(c.dim)));
}

namespace {

// GPT-2's initialisation, applied after the layers drew their defaults.
void init_like_gpt2(nn::Sequential& m, const GptConfig& c, Generator& gen) {
  const double residual_std = c.init_std / std::sqrt(2.0 * static_cast<double>(c.layers));
  for (const auto& [name, t] : m.named_parameters()) {
    const auto ends_with = [&](std::string_view s) { return name.size() >= s.size() && name.ends_with(s); };
    if (ends_with("attn.out_proj.weight") || ends_with("fc2.weight") || ends_with("experts.fc2")) {
      nn::init::normal_(t, 0, residual_std, gen);
    } else if (t.ndim() >= 2) {
      nn::init::normal_(t, 0, c.init_std, gen);  // linear weights, the token and position tables
    } else if (ends_with("bias")) {
      t.detach().copy_from(Tensor::zeros(t.shape(), t.dtype(), t.device()));
    }
    // Norm gains stay at their ones.
  }
}

}  // namespace

std::shared_ptr<nn::Sequential> gpt(const GptConfig& c, Generator& gen) {
  validate(c);
  const bool rope = c.position == Position::rope;
  auto m = std::make_shared<nn::Sequential>();
  auto embed = std::make_shared<nn::TokenPositionEmbedding>(c.vocab, rope ? 0 : c.context, c.dim, gen, c.dropout,
                                                            c.dropout_generator);
  m->push_back(embed);
  const nn::AttentionOptions attention{.causal = true,
                                       .dropout = c.dropout,
                                       .generator = c.dropout_generator,
                                       .kv_heads = c.kv_heads,
                                       .bias = c.bias,
                                       .rope_theta = rope ? c.rope_theta : 0};
  const nn::BlockOptions block{
      .hidden = mlp_hidden(c), .norm = c.norm, .norm_eps = c.norm_eps, .mlp = c.activation, .bias = c.bias};
  for (int64_t i = 0; i < c.layers; ++i) {
    nn::BlockOptions b = block;
    if (c.moe.experts > 0 && (i + 1) % c.moe.every == 0) b.moe = c.moe;
    m->push_back(std::make_shared<nn::TransformerBlock>(c.dim, c.heads, gen, attention, b));
  }
  m->push_back(nn::make_norm(c.norm, c.dim, c.norm_eps));
  if (c.tie_embeddings) {
    m->push_back(std::make_shared<nn::TiedHead>(embed->tok()));
  } else {
    m->push_back(std::make_shared<nn::Linear>(c.dim, c.vocab, gen, nn::LinearOptions{.bias = false}));
  }
  init_like_gpt2(*m, c, gen);
  return m;
}

double training_flops_per_token(const GptConfig& c, int64_t parameters) {
  return 6.0 * static_cast<double>(parameters) +
         12.0 * static_cast<double>(c.layers) * static_cast<double>(c.dim) * static_cast<double>(c.context);
}

Decoder::Decoder(nn::Sequential& model, int64_t capacity) : model_(model), capacity_(capacity) {
  if (model.size() < 3 || !dynamic_cast<nn::TokenPositionEmbedding*>(&model[0])) {
    fail<ValueError>("Decoder: the model is not a gpt (an embedding, blocks, a norm and a head)");
  }
  const auto& embed = static_cast<nn::TokenPositionEmbedding&>(model[0]);
  if (embed.pos().defined() && capacity > embed.pos().size(0)) {
    fail<ValueError>("Decoder: {} positions exceed the model's context of {}", capacity, embed.pos().size(0));
  }
  size_t blocks = 0;
  for (size_t i = 1; i < model.size() && dynamic_cast<nn::TransformerBlock*>(&model[i]); ++i) ++blocks;
  caches_.resize(blocks);
}

Tensor Decoder::forward(const Tensor& tokens) {
  if (tokens.ndim() != 2 || length_ + tokens.size(1) > capacity_) {
    fail<ValueError>("Decoder: {} tokens at position {} do not fit {} positions", to_string(tokens.shape()), length_,
                     capacity_);
  }
  autograd::NoGradGuard no_grad;
  Tensor x = static_cast<nn::TokenPositionEmbedding&>(model_[0]).forward_at(tokens, length_);
  for (size_t i = 0; i < caches_.size(); ++i) {
    x = static_cast<nn::TransformerBlock&>(model_[i + 1]).forward_cached(x, caches_[i], capacity_);
  }
  for (size_t i = caches_.size() + 1; i < model_.size(); ++i) x = model_[i].forward(x);
  length_ += tokens.size(1);
  return x;
}

int64_t sample_token(const Tensor& logits, const SampleOptions& o, Generator& gen) {
  const Tensor l = logits.to(Device::cpu).to(DType::f64).contiguous();
  const int64_t v = l.numel();
  if (v == 0) fail<ValueError>("sample_token: empty logits");
  const double* p = l.data<double>();
  if (o.temperature <= 0) return std::max_element(p, p + v) - p;
  std::vector<int64_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  // Highest first; ties by id, so a draw does not depend on the sort.
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  size_t keep = o.top_k > 0 ? std::min<size_t>(order.size(), static_cast<size_t>(o.top_k)) : order.size();
  std::vector<double> prob(keep);
  const double top = p[order[0]];
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i] = std::exp((p[order[i]] - top) / o.temperature);
  if (o.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < keep && mass < o.top_p * total) mass += prob[n++];
    keep = std::max<size_t>(n, 1);
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += prob[i];
  }
  double u = gen.uniform_f64() * total;
  for (size_t i = 0; i < keep; ++i) {
    if ((u -= prob[i]) < 0) return order[i];
  }
  return order[keep - 1];
}

std::vector<int64_t> generate(nn::Sequential& model, const std::vector<int64_t>& prompt, int64_t tokens,
                              int64_t capacity, const SampleOptions& options, Generator& gen, int64_t stop) {
  if (prompt.empty()) fail<ValueError>("generate: the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) + tokens > capacity) {
    fail<ValueError>("generate: a prompt of {} tokens and {} new ones exceed {} positions", prompt.size(), tokens,
                     capacity);
  }
  const bool was_training = model.is_training();
  model.eval();
  Decoder decoder(model, capacity);
  std::vector<int64_t> out = prompt;
  Tensor ids = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i64);
  std::copy(prompt.begin(), prompt.end(), ids.data<int64_t>());
  const Device device = model.device();
  for (int64_t n = 0; n < tokens; ++n) {
    const Tensor logits = decoder.forward(ids.to(device));  // [1, T, vocab]
    const int64_t t = logits.size(1);
    const int64_t next = sample_token(slice(logits.detach(), 1, t - 1, t), options, gen);
    out.push_back(next);
    if (next == stop) break;
    ids = Tensor::empty({1, 1}, DType::i64);
    ids.data<int64_t>()[0] = next;
  }
  model.train(was_training);
  return out;
}

}  // namespace braid::models
