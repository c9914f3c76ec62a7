// Multi-head self-attention (Vaswani et al., 2017), a pre-norm causal
// Transformer block (GPT-2 layout) and the token + position embedding that
// feeds it. Each maps one tensor to one tensor, so a transformer is an
// nn::Sequential that a pipeline can cut between any two layers.
#pragma once

#include "braid/base/rng.h"
#include "braid/nn/dropout.h"
#include "braid/nn/linear.h"
#include "braid/nn/norm.h"

namespace braid::nn {

struct AttentionOptions {
  bool causal = true;    // position t attends to positions <= t only
  double dropout = 0;    // on the attention weights
  Generator* generator = nullptr;  // dropout masks (null: thread default)
};

// tokens [B, T] (i64, T <= context) -> dropout(tok[tokens] + pos[:T]) [B, T, D].
// Parameters "tok.weight" [vocab, D] ~ N(0, 1) and "pos" [context, D] ~ N(0, 0.02).
class TokenPositionEmbedding final : public Module {
 public:
  TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim, Generator& gen, double dropout = 0,
                         Generator* dropout_generator = nullptr);
  Tensor forward(const Tensor& tokens) override;
  const std::shared_ptr<Embedding>& tok() const { return tok_; }
  const Tensor& pos() const { return pos_; }
  double dropout() const { return drop_->p(); }
  Generator* dropout_generator() const { return drop_->generator(); }

 private:
  std::shared_ptr<Embedding> tok_;
  Tensor pos_;
  std::shared_ptr<Dropout> drop_;
};

// The attention of packed projections: qkv [B, T, 3 * H * hd] laid out as
// [3, H, hd] on the last dim -> softmax(q k^T / sqrt(hd)) v as [B, T, H * hd],
// dropout on the weights. (Tensor-parallel attention runs it on its heads.)
Tensor attend(const Tensor& qkv, int64_t heads, bool causal, Dropout& dropout);

// x [B, T, D] -> [B, T, D]. in_proj: Linear(D, 3D) giving q, k, v;
// heads of D / H; softmax(q k^T / sqrt(D / H)) v; out_proj: Linear(D, D).
class MultiHeadAttention final : public Module {
 public:
  MultiHeadAttention(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }
  const AttentionOptions& options() const { return o_; }
  const std::shared_ptr<Linear>& in_proj() const { return in_proj_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }
  const std::shared_ptr<Dropout>& dropout() const { return drop_; }

 private:
  int64_t dim_, heads_;
  AttentionOptions o_;
  std::shared_ptr<Linear> in_proj_, out_proj_;
  std::shared_ptr<Dropout> drop_;
};

// x + attn(ln1(x)), then + mlp(ln2(x)) with mlp = Linear(D, 4D) GELU Linear(4D, D)
// and dropout on both residual branches. [B, T, D] -> [B, T, D].
class TransformerBlock final : public Module {
 public:
  TransformerBlock(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  const std::shared_ptr<LayerNorm>& ln1() const { return ln1_; }
  const std::shared_ptr<MultiHeadAttention>& attn() const { return attn_; }
  const std::shared_ptr<LayerNorm>& ln2() const { return ln2_; }
  const std::shared_ptr<Linear>& fc1() const { return fc1_; }
  const std::shared_ptr<Linear>& fc2() const { return fc2_; }
  const std::shared_ptr<Dropout>& dropout() const { return drop_; }

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<Dropout> drop_;
};

}  // namespace braid::nn
