// Multi-head self-attention (Vaswani et al., 2017) and a pre-norm causal
// Transformer block (GPT-2 layout).
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

// x [B, T, D] -> [B, T, D]. in_proj: Linear(D, 3D) giving q, k, v;
// heads of D / H; softmax(q k^T / sqrt(D / H)) v; out_proj: Linear(D, D).
class MultiHeadAttention final : public Module {
 public:
  MultiHeadAttention(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;

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

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<Dropout> drop_;
};

}  // namespace braid::nn
