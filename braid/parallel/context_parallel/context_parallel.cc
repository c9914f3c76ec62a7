#include "braid/parallel/context_parallel/context_parallel.h"

#include "braid/base/error.h"
#include "braid/nn/linear.h"
#include "braid/nn/norm.h"
#include "braid/ops/shape.h"
#include "braid/ops/transformer.h"
#include "braid/parallel/context_parallel/ring_attention.h"
#include "braid/parallel/context_parallel/ulysses.h"
#include "braid/parallel/tensor_parallel/layers.h"

namespace braid::parallel::context_parallel {

Mode parse_mode(const std::string& name) {
  if (name == "ring") return Mode::ring;
  if (name == "ulysses") return Mode::ulysses;
  fail<ConfigError>("parallel.context_mode = {} (known: ring, ulysses)", name);
}

const char* name(Mode mode) { return mode == Mode::ring ? "ring" : "ulysses"; }

namespace {

// Rotary positions of x [B, Tl, n, hd] at the global positions of this rank's
// chunks (each chunk's positions are consecutive).
Tensor rotary_at(const Tensor& x, const ContextLayout& layout, double theta) {
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (const auto& [begin, end] : layout.spans(x.size(1) * layout.size)) {
    parts.push_back(rotary_embedding(slice(x, 1, at, at + (end - begin)), begin, theta));
    at += end - begin;
  }
  return parts.size() == 1 ? parts[0] : concat(parts, 1);
}

// The token embedding of a context-parallel rank: it looks up the whole
// sequence (this rank's tokens at their positions, token 0 elsewhere) and
// keeps this rank's rows, so learned positions are the tokens' global ones
// and dropout draws the whole sequence's mask. The lookup is cheap next to a
// block; under tensor parallelism its all-reduce carries C times the rows.
// The embedding's parameters, buffers and children are adopted under their
// own names, so checkpoints and plans see the same model.
class ContextEmbedding final : public nn::Module {
 public:
  ContextEmbedding(std::shared_ptr<nn::Module> inner, ContextLayout layout)
      : inner_(std::move(inner)), layout_(layout) {
    for (const auto& [n, t] : inner_->named_parameters())
      if (n.find('.') == std::string::npos) register_parameter(n, t);
    for (const auto& [n, t] : inner_->named_buffers())
      if (n.find('.') == std::string::npos) register_buffer(n, t);
    for (const auto& [n, child] : inner_->children()) register_module(n, child);
  }

  Tensor forward(const Tensor& tokens) override {
    if (tokens.ndim() != 2) fail<ValueError>("context-parallel embedding: expects [B, T / C] tokens, got {}", to_string(tokens.shape()));
    const int64_t length = tokens.size(1) * layout_.size;
    layout_.check_length(length, "context-parallel embedding");
    Tensor whole = Tensor::zeros({tokens.size(0), length}, tokens.dtype(), tokens.device());
    int64_t at = 0;
    for (const auto& [begin, end] : layout_.spans(length)) {
      slice(whole, 1, begin, end).copy_from(slice(tokens, 1, at, at + (end - begin)));
      at += end - begin;
    }
    return layout_.shard(inner_->forward(whole), 1);
  }

 private:
  std::shared_ptr<nn::Module> inner_;
  ContextLayout layout_;
};

bool is_embedding(const nn::Module& m) {
  return dynamic_cast<const nn::TokenPositionEmbedding*>(&m) ||
         dynamic_cast<const tensor_parallel::ParallelTokenPositionEmbedding*>(&m);
}

}  // namespace

ContextParallel::ContextParallel(comm::Communicator cp, Mode mode)
    : cp_(std::move(cp)), mode_(mode),
      layout_{.size = cp_.size(), .rank = cp_.rank(), .zigzag = mode == Mode::ring} {
  attend_ = [this](const Tensor& qkv, int64_t heads, int64_t kv_heads, bool causal, double rope_theta,
                   nn::Dropout* dropout) {
    if (dropout && dropout->is_training() && dropout->p() > 0) {
      fail<ConfigError>("parallel.context = {}: dropout on the attention weights (p = {}) is not split over the "
                        "context axis; set model.dropout = 0", layout_.size, dropout->p());
    }
    const int64_t width = qkv.ndim() == 3 ? qkv.size(2) : 0, hd = width / (heads + 2 * kv_heads);
    if (qkv.ndim() != 3 || hd == 0 || hd * (heads + 2 * kv_heads) != width) {
      fail<ValueError>("context-parallel attend: qkv {} is not [B, T, ({} + 2 x {} heads) x head dim]",
                       to_string(qkv.shape()), heads, kv_heads);
    }
    const int64_t b = qkv.size(0), t = qkv.size(1);
    auto part = [&](int64_t first, int64_t n) {
      return reshape(slice(qkv, 2, first * hd, (first + n) * hd), {b, t, n, hd});
    };
    Tensor q = part(0, heads), k = part(heads, kv_heads), v = part(heads + kv_heads, kv_heads);
    if (rope_theta > 0) {
      q = rotary_at(q, layout_, rope_theta);
      k = rotary_at(k, layout_, rope_theta);
    }
    const Tensor out = mode_ == Mode::ring
                           ? ring_attention(q, k, v, cp_, {.causal = causal, .zigzag = layout_.zigzag})
                           : ulysses_attention(q, k, v, cp_, causal);
    return reshape(out, {b, t, heads * hd});
  };
}

double ContextParallel::average(double value) const {
  if (cp_.size() == 1) return value;
  std::vector<double> v{value};
  const Duration timeout = cp_.options().timeout;
  comm::Communicator(cp_).allreduce(v, {.op = comm::Op::sum, .timeout = timeout}).wait(Deadline::after(timeout * 2));
  return v[0] / cp_.size();
}

void check_model(const nn::Sequential& model, const ContextParallel& cp, int tensor_degree) {
  const int c = cp.layout().size;
  for (size_t i = 0; i < model.size(); ++i) {
    const nn::Module& layer = model[i];
    if (i == 0 && is_embedding(layer)) continue;
    if (const auto* block = dynamic_cast<const nn::TransformerBlock*>(&layer)) {
      const nn::MultiHeadAttention& attn = *block->attn();
      if (attn.options().dropout > 0) {
        fail<ConfigError>("parallel.context = {}: dropout on the attention weights (model.dropout = {}) is not split "
                          "over the context axis; set model.dropout = 0", c, attn.options().dropout);
      }
      const int64_t heads = attn.heads() / tensor_degree, kv = attn.kv_heads() / tensor_degree;
      if (cp.mode() == Mode::ulysses && (heads % c != 0 || kv % c != 0)) {
        fail<ConfigError>("parallel.context_mode = ulysses splits the heads over parallel.context = {}: {} heads and {} "
                          "key/value heads (model.n_heads = {}, model.kv_heads = {}{}) do not divide by it",
                          c, heads, kv, attn.heads(), attn.kv_heads(),
                          tensor_degree > 1 ? fmt::format(", per parallel.tensor = {} rank", tensor_degree) : "");
      }
      continue;
    }
    // Per-token layers: the final norm and the head.
    if (dynamic_cast<const nn::LayerNorm*>(&layer) || dynamic_cast<const nn::RMSNorm*>(&layer) ||
        dynamic_cast<const nn::Linear*>(&layer) || dynamic_cast<const nn::TiedHead*>(&layer)) {
      continue;
    }
    fail<ConfigError>("parallel.context = {} splits the sequence of model.name = gpt (a token embedding, transformer "
                      "blocks, a norm and a head); layer {} is none of them", c, model.name_of(i));
  }
}

void apply(nn::Sequential& model, const ContextParallel& cp) {
  if (cp.layout().size == 1 || model.size() == 0 || !is_embedding(model[0])) return;
  model.replace(0, std::make_shared<ContextEmbedding>(model.layer(0), cp.layout()));
}

}  // namespace braid::parallel::context_parallel
