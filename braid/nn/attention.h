// Self-attention (Vaswani et al., 2017) and the pre-norm decoder block of
// GPT-2 and LLaMA, with the token embedding that feeds them. Each maps one
// tensor to one tensor, so a transformer is an nn::Sequential that a pipeline
// can cut between any two layers; the block's choices (layer or RMS norm,
// GELU or SwiGLU MLP, learned or rotary positions, grouped-query attention,
// biases) are options, so one set of modules serves the char_transformer,
// GPT-2 and LLaMA (braid/models/gpt.h assembles them).
#pragma once

#include <functional>

#include "braid/base/rng.h"
#include "braid/nn/dropout.h"
#include "braid/nn/linear.h"
#include "braid/nn/moe.h"
#include "braid/nn/norm.h"
#include "braid/nn/recompute.h"

namespace braid::nn {

struct AttentionOptions {
  bool causal = true;    // position t attends to positions <= t only
  double dropout = 0;    // on the attention weights
  Generator* generator = nullptr;  // dropout masks (null: thread default)
  int64_t kv_heads = 0;  // key/value heads; 0: one per query head; fewer (dividing the heads): grouped-query
  bool bias = true;      // of the q/k/v and output projections
  double rope_theta = 0; // > 0: rotary position embedding of q and k with this base (no learned positions)
};

enum class NormKind { layer, rms };
enum class MlpKind { gelu, gelu_tanh, swiglu };

struct BlockOptions {
  int64_t hidden = 0;  // the MLP's width; 0: 4 x dim
  NormKind norm = NormKind::layer;
  double norm_eps = 1e-5;
  MlpKind mlp = MlpKind::gelu;  // swiglu: fc1 holds (gate, up) side by side, [2 hidden, dim]
  bool bias = true;             // of the MLP's linears
  MoeOptions moe{};             // experts > 0: the MLP is a mixture of experts of width `hidden` (moe.h)
};

// Keys and values of the positions seen so far, for decoding a token at a
// time: each step computes its own position's k and v only and attends over
// the cache (never the prefix again).
struct KVCache {
  Tensor k, v;         // [B, capacity, kv_heads, head_dim]
  int64_t length = 0;  // positions filled
};

// tokens [B, T] (i64) -> dropout(tok[tokens] + pos[offset : offset + T]) [B, T, D].
// Parameters "tok.weight" [vocab, D] ~ N(0, 1) and, with context > 0, learned
// positions "pos" [context, D] ~ N(0, 0.02); context 0: no positions here
// (rotary positions live in the attention).
class TokenPositionEmbedding final : public Module {
 public:
  TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim, Generator& gen, double dropout = 0,
                         Generator* dropout_generator = nullptr);
  Tensor forward(const Tensor& tokens) override { return forward_at(tokens, 0); }
  Tensor forward_at(const Tensor& tokens, int64_t offset);
  const std::shared_ptr<Embedding>& tok() const { return tok_; }
  const Tensor& pos() const { return pos_; }  // undefined without learned positions
  double dropout() const { return drop_->p(); }
  Generator* dropout_generator() const { return drop_->generator(); }

 private:
  std::shared_ptr<Embedding> tok_;
  Tensor pos_;
  std::shared_ptr<Dropout> drop_;
};

// softmax(q k^T * scale [+ causal mask]) v, the mask aligned to the last
// query: query i of Tq sees keys j <= i + Tk - Tq (Tq = 1 against a cache is
// one decoding step). q [B, Tq, H, hd], k and v [B, Tk, KV, hd] (KV divides H:
// query head h reads key/value head h / (H / KV)); any strides with a
// contiguous last dim. -> [B, Tq, H * hd]. Dropout on the weights when
// `dropout` is training with p > 0.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Dropout* dropout = nullptr);

// Whether attend() on `qkv` keeps [Tq, Tk] attention weights for backward: the
// composed path (f16 and bf16 inputs) does; the fused kernel (f32 and f64, on
// the CPU and on CUDA devices) and an installed AttendOverride (context
// parallelism) keep only the output and its log-sum-exp. Selective recompute rematerialises the attention core only
// where it keeps weights: elsewhere a rerun would cost a whole attention
// forward to save one [B, T, H hd] tensor.
bool attend_keeps_scores(const Tensor& qkv);

// The attention of packed projections: qkv [B, T, (H + 2 KV) * hd] holding q,
// k and v side by side on the last dim -> [B, T, H * hd]; rotary positions
// (from `offset`) on q and k when rope_theta > 0. (Tensor-parallel attention
// runs it on its own heads.)
Tensor attend(const Tensor& qkv, int64_t heads, int64_t kv_heads, bool causal, double rope_theta, Dropout* dropout);

// attend() replaced for a region of one thread: while an AttendOverride lives,
// attend(...) on its thread calls the function instead. Context parallelism
// installs its ring or Ulysses attention this way around a step's forward and
// backward (as TorchTitan's context_parallel swaps PyTorch's SDPA), so every
// attention layer, whole or tensor-parallel, takes part without being rebuilt.
// Regions nest; decoding with a cache does not go through attend().
using AttendFn = std::function<Tensor(const Tensor& qkv, int64_t heads, int64_t kv_heads, bool causal,
                                      double rope_theta, Dropout* dropout)>;
class AttendOverride {
 public:
  explicit AttendOverride(const AttendFn* fn);  // null: attend() itself
  ~AttendOverride();
  AttendOverride(const AttendOverride&) = delete;
  AttendOverride& operator=(const AttendOverride&) = delete;

 private:
  const AttendFn* previous_;
};

// x [B, T, D] -> [B, T, D]. in_proj: Linear(D, (H + 2 KV) hd) giving q, k, v;
// heads of hd = D / H; out_proj: Linear(H hd, D). Under selective recompute
// the attention core's output (out_proj's input) is rematerialised.
class MultiHeadAttention final : public Module, public Recomputable {
 public:
  MultiHeadAttention(int64_t dim, int64_t heads, Generator& gen, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  void set_recompute(Recompute mode) override { recompute_ = mode; }
  Recompute recompute() const override { return recompute_; }
  // One step of decoding (or a prompt's prefill): x [B, T, D] at positions
  // cache.length ... + T - 1; appends this step's keys and values to the
  // cache (allocated to `capacity` positions on first use).
  Tensor forward_cached(const Tensor& x, KVCache& cache, int64_t capacity);
  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return dim_ / heads_; }
  const AttentionOptions& options() const { return o_; }
  const std::shared_ptr<Linear>& in_proj() const { return in_proj_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }
  const std::shared_ptr<Dropout>& dropout() const { return drop_; }

 private:
  int64_t dim_, heads_, kv_heads_;
  AttentionOptions o_;
  std::shared_ptr<Linear> in_proj_, out_proj_;
  std::shared_ptr<Dropout> drop_;
  Recompute recompute_ = Recompute::none;
};

// RMS normalisation of the last dim with a learned gain "weight" (ones).
class RMSNorm final : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) override;
  double eps() const { return eps_; }

 private:
  double eps_;
  Tensor weight_;
};

// A norm of `dim` features of this kind (LayerNorm or RMSNorm).
std::shared_ptr<Module> make_norm(NormKind kind, int64_t dim, double eps);

// x + drop(attn(ln1(x))), then + drop(mlp(ln2(x))): mlp = fc2(act(fc1(x)))
// with act GELU, or fc2(silu(gate) * up) with fc1 = (gate, up). [B, T, D] -> [B, T, D].
// Recompute (recompute.h): full checkpoints the whole block; selective keeps
// the GEMM outputs and rematerialises the norms' and the activation's outputs
// (in f32; under autocast the GEMMs keep 16-bit copies of their inputs) and
// the attention core where it keeps T x T weights.
class TransformerBlock final : public Module, public Recomputable {
 public:
  TransformerBlock(int64_t dim, int64_t heads, Generator& gen, AttentionOptions attention = {},
                   BlockOptions block = {});
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, KVCache& cache, int64_t capacity);
  // The MLP on a (normalised) input: shared with the tensor-parallel block;
  // `selective`: the activation's output is rematerialised into fc2.
  static Tensor mlp(const Tensor& x, Module& fc1, Module& fc2, MlpKind kind, bool selective = false);
  // x + drop(attn(ln1(x))), then + drop(mlp(ln2(.))) under a recompute mode
  // (none or selective; full wraps this in a checkpoint): shared with the
  // tensor-parallel block, whose pieces are its own.
  static Tensor residual_body(const Tensor& x, Module& ln1, Module& attn, Module& ln2, Module& fc1, Module& fc2,
                              Module& drop, MlpKind kind, Recompute mode);
  // Sets the attention's mode too (selective rematerialises its core).
  void set_recompute(Recompute mode) override;
  Recompute recompute() const override { return recompute_; }
  const BlockOptions& block_options() const { return b_; }
  const std::shared_ptr<Module>& ln1() const { return ln1_; }
  const std::shared_ptr<MultiHeadAttention>& attn() const { return attn_; }
  const std::shared_ptr<Module>& ln2() const { return ln2_; }
  const std::shared_ptr<Linear>& fc1() const { return fc1_; }
  const std::shared_ptr<Linear>& fc2() const { return fc2_; }
  const std::shared_ptr<MoE>& moe() const { return moe_; }  // null (and fc1, fc2 set) for a dense MLP
  const std::shared_ptr<Dropout>& dropout() const { return drop_; }

 private:
  BlockOptions b_;
  std::shared_ptr<Module> ln1_, ln2_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<MoE> moe_;
  std::shared_ptr<Dropout> drop_;
  Recompute recompute_ = Recompute::none;
};

// logits = x E^T with E the embedding table of `tied` (a language model's
// head tied to its input embedding, as GPT-2): no parameter of its own; the
// gradient of both uses accumulates in the one table.
class TiedHead final : public Module {
 public:
  explicit TiedHead(std::shared_ptr<Embedding> tied) : tied_(std::move(tied)) {}
  Tensor forward(const Tensor& x) override;
  const std::shared_ptr<Embedding>& tied() const { return tied_; }

 private:
  std::shared_ptr<Embedding> tied_;
};

}  // namespace braid::nn
