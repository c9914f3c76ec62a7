#include "braid/nn/attention.h"

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/nn/init.h"
#include "braid/ops/activation.h"
#include "braid/ops/attention.h"
#include "braid/ops/autocast.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/linear.h"
#include "braid/ops/matmul.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"
#include "braid/ops/transformer.h"

namespace braid::nn {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim, Generator& gen,
                                               double dropout, Generator* dropout_generator) {
  tok_ = register_module("tok", std::make_shared<Embedding>(vocab, dim, gen));
  if (context > 0) {
    pos_ = register_parameter("pos", Tensor::empty({context, dim}));
    init::normal_(pos_, 0, 0.02, gen);
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout, dropout_generator));
}

Tensor TokenPositionEmbedding::forward_at(const Tensor& tokens, int64_t offset) {
  if (tokens.ndim() != 2 || (pos_.defined() && offset + tokens.size(1) > pos_.size(0))) {
    fail<ValueError>("TokenPositionEmbedding: expects [B, T] tokens at positions {} + T <= {}, got {}", offset,
                     pos_.defined() ? pos_.size(0) : 0, to_string(tokens.shape()));
  }
  Tensor x = tok_->forward(tokens);
  if (pos_.defined()) x = add(x, slice(pos_, 0, offset, offset + tokens.size(1)));  // [B, T, D] + [T, D]
  return drop_->forward(x);
}

namespace {

// [B, T, G, hd] -> [B * G, T, hd] contiguous, each of the G heads repeated
// `repeat` times in place (grouped-query attention's shared keys and values).
Tensor heads_first(const Tensor& x, int64_t repeat) {
  const int64_t b = x.size(0), t = x.size(1), g = x.size(2), hd = x.size(3);
  Tensor p = permute(x, {0, 2, 1, 3});  // [B, G, T, hd]
  if (repeat > 1) p = expand(unsqueeze(p, 2), {b, g, repeat, t, hd});
  return reshape(contiguous(p), {b * g * repeat, t, hd});
}

// Whether attention() takes the fused op for inputs like t.
bool fused_attention(const Tensor& t) {
  return (t.device().is_cpu() || t.device().is_cuda()) && (t.dtype() == DType::f32 || t.dtype() == DType::f64);
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Dropout* dropout) {
  if (q.ndim() != 4 || k.ndim() != 4 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(3) != k.size(3) ||
      k.size(2) == 0 || q.size(2) % k.size(2) != 0 || q.size(1) > k.size(1)) {
    fail<ValueError>("attention: q {} and k, v {} {} are not [B, Tq, H, hd] and [B, Tk >= Tq, KV | H, hd]",
                     to_string(q.shape()), to_string(k.shape()), to_string(v.shape()));
  }
  const int64_t b = q.size(0), tq = q.size(1), h = q.size(2), hd = q.size(3), tk = k.size(1);
  const bool drop = dropout && dropout->is_training() && dropout->p() > 0;
  // The fused op where it has a kernel (CPU and CUDA, f32 and f64): no
  // [Tq, Tk] scores, q/k/v read in place.
  if (fused_attention(q)) {
    const Tensor o = scaled_dot_product_attention(
        q, k, v,
        {.causal = causal, .dropout = drop ? dropout->p() : 0.0, .generator = drop ? dropout->generator() : nullptr});
    return reshape(o, {b, tq, h * hd});
  }
  // Elsewhere (f16 and bf16 inputs): matmul, mask, softmax, matmul.
  const int64_t repeat = h / k.size(2);
  const Tensor qh = heads_first(q, 1), kh = heads_first(k, repeat), vh = heads_first(v, repeat);
  Tensor scores = mul(matmul(qh, transpose(kh, 1, 2)), 1 / std::sqrt(static_cast<double>(hd)));  // [B*H, Tq, Tk]
  if (causal && tk > 1) {
    Tensor mask = Tensor::zeros({tq, tk}, DType::b8);
    bool* m = mask.data<bool>();
    for (int64_t i = 0; i < tq; ++i) {
      for (int64_t j = i + tk - tq + 1; j < tk; ++j) m[i * tk + j] = true;  // future positions
    }
    // Built on the host (Tq x Tk bools), then placed beside the scores: ops
    // refuse inputs on two devices.
    scores = masked_fill(scores, mask.to(scores.device()), -INFINITY);
  }
  Tensor attn = softmax(scores, -1);
  if (dropout) attn = dropout->forward(attn);
  const Tensor out = matmul(attn, vh);  // [B*H, Tq, hd]
  return reshape(contiguous(permute(reshape(out, {b, h, tq, hd}), {0, 2, 1, 3})), {b, tq, h * hd});
}

namespace {

struct Qkv {
  Tensor q, k, v;  // [B, T, heads, hd] views of the packed projection
};

Qkv split_qkv(const Tensor& qkv, int64_t heads, int64_t kv_heads) {
  const int64_t width = qkv.ndim() == 3 ? qkv.size(2) : 0, hd = width / (heads + 2 * kv_heads);
  if (qkv.ndim() != 3 || hd == 0 || hd * (heads + 2 * kv_heads) != width) {
    fail<ValueError>("attend: qkv {} is not [B, T, ({} + 2 x {} heads) x head dim]", to_string(qkv.shape()), heads,
                     kv_heads);
  }
  const int64_t b = qkv.size(0), t = qkv.size(1);
  auto part = [&](int64_t first, int64_t n) { return reshape(slice(qkv, 2, first * hd, (first + n) * hd), {b, t, n, hd}); };
  return {part(0, heads), part(heads, kv_heads), part(heads + kv_heads, kv_heads)};
}

}  // namespace

namespace {
thread_local const AttendFn* attend_override = nullptr;
}  // namespace

AttendOverride::AttendOverride(const AttendFn* fn) : previous_(attend_override) { attend_override = fn; }

AttendOverride::~AttendOverride() { attend_override = previous_; }

Tensor attend(const Tensor& qkv, int64_t heads, int64_t kv_heads, bool causal, double rope_theta, Dropout* dropout) {
  if (attend_override) return (*attend_override)(qkv, heads, kv_heads, causal, rope_theta, dropout);
  Qkv p = split_qkv(qkv, heads, kv_heads);
  if (rope_theta > 0) {
    p.q = rotary_embedding(p.q, 0, rope_theta);
    p.k = rotary_embedding(p.k, 0, rope_theta);
  }
  return attention(p.q, p.k, p.v, causal, dropout);
}

bool attend_keeps_scores(const Tensor& qkv) {
  if (attend_override) return false;
  return !fused_attention(qkv);
}

MultiHeadAttention::MultiHeadAttention(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options)
    : dim_(dim), heads_(heads), kv_heads_(options.kv_heads > 0 ? options.kv_heads : heads), o_(options) {
  if (dim <= 0 || heads <= 0 || dim % heads != 0) {
    fail<ValueError>("MultiHeadAttention: heads ({}) must divide dim ({})", heads, dim);
  }
  if (heads % kv_heads_ != 0) {
    fail<ValueError>("MultiHeadAttention: key/value heads ({}) must divide the heads ({})", kv_heads_, heads);
  }
  if (o_.rope_theta > 0 && (dim / heads) % 2 != 0) {
    fail<ValueError>("MultiHeadAttention: rotary positions need an even head dim, got {}", dim / heads);
  }
  const int64_t hd = dim / heads;
  in_proj_ = register_module("in_proj", std::make_shared<Linear>(dim, (heads + 2 * kv_heads_) * hd, gen,
                                                                   LinearOptions{.bias = o_.bias}));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(dim, dim, gen, LinearOptions{.bias = o_.bias}));
  drop_ = register_module("drop", std::make_shared<Dropout>(o_.dropout, o_.generator));
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  if (x.ndim() != 3 || x.size(2) != dim_) {
    fail<ValueError>("MultiHeadAttention: expects [B, T, {}], got {}", dim_, to_string(x.shape()));
  }
  const Tensor qkv = in_proj_->forward(x);
  if (recompute_ != Recompute::selective || !attend_keeps_scores(qkv)) {
    return out_proj_->forward(attend(qkv, heads_, kv_heads_, o_.causal, o_.rope_theta, drop_.get()));
  }
  // The core's output [B, T, H hd] is freed once out_proj has read it; its
  // dropout masks are drawn again from the same generator state.
  Rematerialized core(
      [this](const Tensor& v) { return attend(v, heads_, kv_heads_, o_.causal, o_.rope_theta, drop_.get()); }, qkv,
      dropout_generators(*drop_));
  return core.release_after(out_proj_->forward(core.output()));
}

Tensor MultiHeadAttention::forward_cached(const Tensor& x, KVCache& cache, int64_t capacity) {
  if (x.ndim() != 3 || x.size(2) != dim_) {
    fail<ValueError>("MultiHeadAttention: expects [B, T, {}], got {}", dim_, to_string(x.shape()));
  }
  const int64_t b = x.size(0), t = x.size(1), hd = dim_ / heads_;
  if (!cache.k.defined()) {
    cache.k = Tensor::zeros({b, capacity, kv_heads_, hd}, x.dtype(), x.device());
    cache.v = Tensor::zeros({b, capacity, kv_heads_, hd}, x.dtype(), x.device());
    cache.length = 0;
  }
  const int64_t at = cache.length;
  if (cache.k.size(0) != b || at + t > cache.k.size(1)) {
    fail<ValueError>("MultiHeadAttention: {} more positions of batch {} do not fit a cache of {} x {} holding {}", t,
                     b, cache.k.size(0), cache.k.size(1), at);
  }
  Qkv p = split_qkv(in_proj_->forward(x), heads_, kv_heads_);
  if (o_.rope_theta > 0) {
    p.q = rotary_embedding(p.q, at, o_.rope_theta);
    p.k = rotary_embedding(p.k, at, o_.rope_theta);
  }
  slice(cache.k, 1, at, at + t).copy_from(p.k);
  slice(cache.v, 1, at, at + t).copy_from(p.v);
  cache.length = at + t;
  const Tensor out = attention(p.q, slice(cache.k, 1, 0, at + t), slice(cache.v, 1, 0, at + t), o_.causal, nullptr);
  return out_proj_->forward(out);
}

RMSNorm::RMSNorm(int64_t dim, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, weight_, eps_); }

std::shared_ptr<Module> make_norm(NormKind kind, int64_t dim, double eps) {
  if (kind == NormKind::rms) return std::make_shared<RMSNorm>(dim, eps);
  return std::make_shared<LayerNorm>(Shape{dim}, eps);
}

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads, Generator& gen, AttentionOptions attention,
                                   BlockOptions block)
    : b_(block) {
  const int64_t hidden = b_.hidden > 0 ? b_.hidden : 4 * dim;
  b_.hidden = hidden;
  ln1_ = register_module("ln1", make_norm(b_.norm, dim, b_.norm_eps));
  attn_ = register_module("attn", std::make_shared<MultiHeadAttention>(dim, heads, gen, attention));
  ln2_ = register_module("ln2", make_norm(b_.norm, dim, b_.norm_eps));
  const int64_t fc1_out = b_.mlp == MlpKind::swiglu ? 2 * hidden : hidden;
  if (b_.moe.experts > 0) {
    moe_ = register_module("moe", std::make_shared<MoE>(dim, hidden, b_.mlp, b_.moe, gen));
  } else {
    fc1_ = register_module("fc1", std::make_shared<Linear>(dim, fc1_out, gen, LinearOptions{.bias = b_.bias}));
    fc2_ = register_module("fc2", std::make_shared<Linear>(hidden, dim, gen, LinearOptions{.bias = b_.bias}));
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(attention.dropout, attention.generator));
}

Tensor TransformerBlock::mlp(const Tensor& x, Module& fc1, Module& fc2, MlpKind kind, bool selective) {
  const Tensor h = fc1.forward(x);
  const TensorFn act = [kind](const Tensor& v) {
    switch (kind) {
      case MlpKind::gelu: return gelu(v);
      case MlpKind::gelu_tanh: return gelu(v, GeluApproximation::tanh);
      case MlpKind::swiglu: return swiglu(v);
    }
    return Tensor();
  };
  // Under autocast fc2 keeps a 16-bit copy of its input and nothing keeps
  // the f32 activation: there is nothing to rematerialise.
  if (!selective || autocast_dtype() != DType::f32) return fc2.forward(act(h));
  // fc1's output stays (GELU's backward reads it), the activation's goes.
  Rematerialized a(act, h, {}, Refill::rerun_twice);
  return a.release_after(fc2.forward(a.output()));
}

Tensor TransformerBlock::residual_body(const Tensor& x, Module& ln1, Module& attn, Module& ln2, Module& fc1,
                                       Module& fc2, Module& drop, MlpKind kind, Recompute mode) {
  if (mode != Recompute::selective) {
    Tensor h = add(x, drop.forward(attn.forward(ln1.forward(x))));
    return add(h, drop.forward(mlp(ln2.forward(h), fc1, fc2, kind)));
  }
  // The norms' outputs are freed once the GEMMs after them have read them
  // (under autocast the GEMMs keep 16-bit copies and the f32 outputs go
  // anyway). The residual dropouts keep their masks: a checkpoint would keep
  // their inputs instead, as large (masks are f32).
  const bool copies = autocast_dtype() != DType::f32;
  const auto norm_into = [&](Module& norm, const Tensor& v, const TensorFn& consumer) {
    return copies ? consumer(norm.forward(v)) : rematerialize(norm, v, consumer);
  };
  Tensor h = add(x, drop.forward(norm_into(ln1, x, [&](const Tensor& n) { return attn.forward(n); })));
  return add(h, drop.forward(norm_into(ln2, h, [&](const Tensor& n) { return mlp(n, fc1, fc2, kind, true); })));
}

void TransformerBlock::set_recompute(Recompute mode) {
  recompute_ = mode;
  attn_->set_recompute(mode == Recompute::selective ? mode : Recompute::none);
}

Tensor TransformerBlock::forward(const Tensor& x) {
  if (moe_) {  // recompute leaves MoE blocks alone: a replayed forward would route and exchange again (docs/moe.md)
    Tensor h = add(x, drop_->forward(attn_->forward(ln1_->forward(x))));
    return add(h, drop_->forward(moe_->forward(ln2_->forward(h))));
  }
  auto body = [this](const Tensor& v, Recompute mode) {
    return residual_body(v, *ln1_, *attn_, *ln2_, *fc1_, *fc2_, *drop_, b_.mlp, mode);
  };
  if (recompute_ == Recompute::full) {
    return checkpoint_module(*this, x, [body](const Tensor& v) { return body(v, Recompute::none); });
  }
  return body(x, recompute_);
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KVCache& cache, int64_t capacity) {
  Tensor h = add(x, drop_->forward(attn_->forward_cached(ln1_->forward(x), cache, capacity)));
  if (moe_) return add(h, drop_->forward(moe_->forward(ln2_->forward(h))));
  return add(h, drop_->forward(mlp(ln2_->forward(h), *fc1_, *fc2_, b_.mlp)));
}

Tensor TiedHead::forward(const Tensor& x) { return linear(x, tied_->weight(), Tensor()); }

}  // namespace braid::nn
