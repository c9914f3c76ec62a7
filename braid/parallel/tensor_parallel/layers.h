// Tensor-parallel layers (Megatron-LM), each built from the whole layer's
// already-initialised weights: rank r of T keeps its slice, so a sharded
// model starts exactly where the whole one does. Parameter names are those of
// the layer it replaces. Slices that do not divide evenly go one row more to
// the first ranks (shard_spec.h, shard_range).
#pragma once

#include <memory>

#include "braid/comm/communicator.h"
#include "braid/nn/attention.h"
#include "braid/nn/dropout.h"
#include "braid/nn/linear.h"
#include "braid/parallel/shard_spec.h"
#include "braid/parallel/tensor_parallel/sequence_parallel.h"

namespace braid::parallel::tensor_parallel {

// y = x W^T + b with W's rows (outputs) split: x replicated -> this rank's
// slice of y, or the whole y with gather_output.
class ColumnParallelLinear final : public nn::Module {
 public:
  // blocks > 1: the outputs are that many equal blocks (SwiGLU's gate and
  // up), each split alike, this rank's slices side by side.
  // Under o.sequence_parallel x is this rank's sequence segment and the
  // output covers the whole sequence (a head's logits, an MLP's hidden units).
  ColumnParallelLinear(const nn::Linear& whole, comm::Communicator tp, bool gather_output, int blocks = 1,
                       TpOptions o = {});
  Tensor forward(const Tensor& x) override;
  // Output widths of every rank (the vocabulary shards of a head).
  const std::vector<int64_t>& widths() const { return widths_; }
  int64_t offset() const { return offset_; }
  void add_specs(const std::string& prefix, ShardSpecs& specs) const;

 private:
  comm::Communicator tp_;
  TpOptions o_;
  bool gather_;
  int blocks_;
  std::vector<int64_t> widths_;
  int64_t offset_, in_, out_;
  Tensor weight_, bias_;
};

// y = x W^T + b with W's columns (inputs) split: x is this rank's slice of the
// features -> the whole y (partial products all-reduced, then the bias once);
// under o.sequence_parallel this rank's sequence segment of y (reduce-scattered;
// the bias, added on the segment, has its gradient summed over the ranks).
class RowParallelLinear final : public nn::Module {
 public:
  RowParallelLinear(const nn::Linear& whole, comm::Communicator tp, TpOptions o = {});
  Tensor forward(const Tensor& x) override;
  void add_specs(const std::string& prefix, ShardSpecs& specs) const;

 private:
  comm::Communicator tp_;
  TpOptions o_;
  int64_t offset_, in_, out_;
  Tensor weight_, bias_;
};

// Self-attention with the heads split: q, k, v projections of this rank's
// heads (column-parallel), attention on them, the output projection
// row-parallel. Heads must divide evenly. Dropout on the attention weights
// draws from a generator of this tensor rank's own (stream offset by the
// rank), so ranks drop independent elements of different heads.
class ParallelAttention final : public nn::Module, public nn::Recomputable {
 public:
  ParallelAttention(const nn::MultiHeadAttention& whole, comm::Communicator tp, TpOptions o = {});
  Tensor forward(const Tensor& x) override;
  void add_specs(const std::string& prefix, ShardSpecs& specs) const;
  // selective: the core's output is rematerialised into out_proj (nn/recompute.h).
  void set_recompute(nn::Recompute mode) override { recompute_ = mode; }
  nn::Recompute recompute() const override { return recompute_; }

 private:
  comm::Communicator tp_;
  TpOptions o_;
  int64_t dim_, heads_, local_heads_, head_dim_;
  bool causal_;
  double rope_theta_;
  std::unique_ptr<Generator> drop_gen_;
  std::shared_ptr<nn::Module> in_proj_, out_proj_;  // parameter holders named like the whole layer's
  std::shared_ptr<nn::Dropout> drop_;
  nn::Recompute recompute_ = nn::Recompute::none;
};

// A pre-norm transformer block with parallel attention and the MLP split
// column (fc1) then row (fc2); layer norms and residual dropout replicated
// (the same generator state on every rank, so the same masks). Under
// o.sequence_parallel the block's input and output are this rank's sequence
// segment [B, T / t, D]: norms (SequenceParallelNorm), residual dropout (a
// generator of this tensor rank's own) and residuals run on it.
class ParallelTransformerBlock final : public nn::Module, public nn::Recomputable {
 public:
  ParallelTransformerBlock(const nn::TransformerBlock& whole, comm::Communicator tp, TpOptions o = {});
  Tensor forward(const Tensor& x) override;
  void add_specs(const std::string& prefix, ShardSpecs& specs) const;
  // As nn::TransformerBlock's (a full rerun repeats the forward's all-reduces).
  void set_recompute(nn::Recompute mode) override;
  nn::Recompute recompute() const override { return recompute_; }

 private:
  std::shared_ptr<nn::Module> ln1_, ln2_;
  std::shared_ptr<ParallelAttention> attn_;
  std::shared_ptr<ColumnParallelLinear> fc1_;
  std::shared_ptr<RowParallelLinear> fc2_;
  std::shared_ptr<nn::MoE> moe_;  // a mixture-of-experts MLP stays whole on every tensor rank (fc1, fc2 null)
  nn::MlpKind mlp_;
  std::shared_ptr<nn::Dropout> drop_;
  std::unique_ptr<Generator> drop_gen_;  // sequence parallel: this rank's residual-dropout stream
  nn::Recompute recompute_ = nn::Recompute::none;
};

// Token embedding with the vocabulary split: each rank looks up the tokens in
// its range (zeros for the others) and the rows are all-reduced; learned
// positions replicated. Under o.sequence_parallel the rows are reduce-scattered
// along the sequence instead (Megatron's scatter after the embedding): the
// output is this rank's segment, with its positions and its own dropout stream.
class ParallelTokenPositionEmbedding final : public nn::Module {
 public:
  ParallelTokenPositionEmbedding(const nn::TokenPositionEmbedding& whole, comm::Communicator tp, TpOptions o = {});
  Tensor forward(const Tensor& tokens) override;
  void add_specs(const std::string& prefix, ShardSpecs& specs) const;
  // This rank's rows of the token table (a tied head reads them too).
  const Tensor& table() const { return tok_weight_; }
  int64_t vocab() const { return vocab_; }
  int64_t begin() const { return begin_; }

 private:
  comm::Communicator tp_;
  TpOptions o_;
  int64_t vocab_, begin_, end_;
  std::shared_ptr<nn::Module> tok_;  // holds "weight", this rank's rows
  Tensor tok_weight_, pos_;
  std::unique_ptr<Generator> drop_gen_;  // sequence parallel: this rank's stream
  std::shared_ptr<nn::Dropout> drop_;
};

// The head tied to a vocabulary-parallel embedding (nn::TiedHead): x
// replicated -> this rank's slice of the logits, x E_r^T with E_r the rows of
// the table the embedding holds here; no parameter of its own, so the
// gradients of both uses meet in the one shard. Under o.sequence_parallel x is
// this rank's segment, gathered along the sequence before the product.
class ParallelTiedHead final : public nn::Module {
 public:
  ParallelTiedHead(std::shared_ptr<ParallelTokenPositionEmbedding> embedding, comm::Communicator tp, TpOptions o = {});
  Tensor forward(const Tensor& x) override;
  const std::vector<int64_t>& widths() const { return widths_; }

 private:
  std::shared_ptr<ParallelTokenPositionEmbedding> embedding_;
  comm::Communicator tp_;
  TpOptions o_;
  std::vector<int64_t> widths_;
};

}  // namespace braid::parallel::tensor_parallel
