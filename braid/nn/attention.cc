#include "braid/nn/attention.h"

#include <cmath>

#include "braid/nn/init.h"
#include "braid/ops/activation.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/matmul.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"

namespace braid::nn {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim, Generator& gen,
                                               double dropout, Generator* dropout_generator) {
  tok_ = register_module("tok", std::make_shared<Embedding>(vocab, dim, gen));
  pos_ = register_parameter("pos", Tensor::empty({context, dim}));
  init::normal_(pos_, 0, 0.02, gen);
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout, dropout_generator));
}

Tensor TokenPositionEmbedding::forward(const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.size(1) > pos_.size(0)) {
    fail<ValueError>("TokenPositionEmbedding: expects [B, T <= {}] tokens, got {}", pos_.size(0),
                     to_string(tokens.shape()));
  }
  return drop_->forward(add(tok_->forward(tokens), slice(pos_, 0, 0, tokens.size(1))));  // [B, T, D] + [T, D]
}

MultiHeadAttention::MultiHeadAttention(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options)
    : dim_(dim), heads_(heads), o_(options) {
  if (dim <= 0 || heads <= 0 || dim % heads != 0) {
    fail<ValueError>("MultiHeadAttention: heads ({}) must divide dim ({})", heads, dim);
  }
  in_proj_ = register_module("in_proj", std::make_shared<Linear>(dim, 3 * dim, gen));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(dim, dim, gen));
  drop_ = register_module("drop", std::make_shared<Dropout>(o_.dropout, o_.generator));
}

Tensor attend(const Tensor& qkv, int64_t heads, bool causal, Dropout& dropout) {
  const int64_t b = qkv.size(0), t = qkv.size(1), hd = qkv.size(2) / (3 * heads);
  if (qkv.ndim() != 3 || hd * 3 * heads != qkv.size(2)) {
    fail<ValueError>("attend: qkv {} is not [B, T, 3 x {} heads x head dim]", to_string(qkv.shape()), heads);
  }
  // [B, T, 3H hd] -> [3, B, H, T, hd] -> three [B*H, T, hd]
  Tensor p = permute(reshape(qkv, {b, t, 3, heads, hd}), {2, 0, 3, 1, 4});
  auto head = [&](int64_t i) { return reshape(contiguous(squeeze(slice(p, 0, i, i + 1), 0)), {b * heads, t, hd}); };
  const Tensor q = head(0), k = head(1), v = head(2);
  Tensor scores = mul(matmul(q, transpose(k, 1, 2)), 1 / std::sqrt(static_cast<double>(hd)));  // [B*H, T, T]
  if (causal) {
    Tensor mask = Tensor::zeros({t, t}, DType::b8);
    bool* m = mask.data<bool>();
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) m[i * t + j] = true;  // future positions
    }
    // Built on the host (T^2 bools), then placed beside the scores: ops refuse
    // inputs on two devices.
    scores = masked_fill(scores, mask.to(scores.device()), -INFINITY);
  }
  Tensor attn = dropout.forward(softmax(scores, -1));
  Tensor out = matmul(attn, v);  // [B*H, T, hd]
  return reshape(contiguous(permute(reshape(out, {b, heads, t, hd}), {0, 2, 1, 3})), {b, t, heads * hd});
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  if (x.ndim() != 3 || x.size(2) != dim_) {
    fail<ValueError>("MultiHeadAttention: expects [B, T, {}], got {}", dim_, to_string(x.shape()));
  }
  return out_proj_->forward(attend(in_proj_->forward(x), heads_, o_.causal, *drop_));
}

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options) {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(Shape{dim}));
  attn_ = register_module("attn", std::make_shared<MultiHeadAttention>(dim, heads, gen, options));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(Shape{dim}));
  fc1_ = register_module("fc1", std::make_shared<Linear>(dim, 4 * dim, gen));
  fc2_ = register_module("fc2", std::make_shared<Linear>(4 * dim, dim, gen));
  drop_ = register_module("drop", std::make_shared<Dropout>(options.dropout, options.generator));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = add(x, drop_->forward(attn_->forward(ln1_->forward(x))));
  return add(h, drop_->forward(fc2_->forward(gelu(fc1_->forward(ln2_->forward(h))))));
}

}  // namespace braid::nn
