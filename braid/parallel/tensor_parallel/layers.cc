#include "braid/parallel/tensor_parallel/layers.h"

#include "braid/ops/activation.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/index.h"
#include "braid/ops/linear.h"
#include "braid/ops/shape.h"
#include "braid/parallel/tensor_parallel/collectives.h"

namespace braid::parallel::tensor_parallel {

namespace {

// A child that only holds parameters under a layer's names ("in_proj.weight").
class Holder final : public nn::Module {
 public:
  Tensor add(std::string name, const Tensor& t) { return t.defined() ? register_parameter(std::move(name), t) : t; }
  Tensor forward(const Tensor&) override { fail<ValueError>("a parameter holder has no forward"); }
};

// Rows [b, e) of dim `dim` in a fresh buffer of their own (the whole layer's
// memory is released once the whole model goes).
Tensor rows(const Tensor& t, int dim, int64_t b, int64_t e) {
  return t.defined() ? slice(t.detach(), dim, b, e).clone() : Tensor();
}

std::vector<int64_t> widths_of(int64_t n, int parts) {
  std::vector<int64_t> w;
  for (int i = 0; i < parts; ++i) {
    const auto [b, e] = shard_range(n, parts, i);
    w.push_back(e - b);
  }
  return w;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(const nn::Linear& whole, comm::Communicator tp, bool gather_output,
                                           int blocks, TpOptions o)
    : tp_(std::move(tp)), o_(std::move(o)), gather_(gather_output), blocks_(blocks) {
  out_ = whole.weight().size(0), in_ = whole.weight().size(1);
  const int64_t block = out_ / blocks_;
  if (block < tp_.size()) fail<ConfigError>("tensor parallel: {} outputs cannot be split {} ways", block, tp_.size());
  if (gather_ && blocks_ > 1) fail<ValueError>("ColumnParallelLinear: a layer of blocks cannot gather its output");
  widths_ = widths_of(out_, tp_.size());
  const auto [b, e] = shard_range(block, tp_.size(), tp_.rank());
  offset_ = b;
  // This rank's rows of each block, side by side.
  std::vector<Tensor> w, bias;
  for (int i = 0; i < blocks_; ++i) {
    w.push_back(rows(whole.weight(), 0, i * block + b, i * block + e));
    if (whole.bias().defined()) bias.push_back(rows(whole.bias(), 0, i * block + b, i * block + e));
  }
  weight_ = register_parameter("weight", blocks_ == 1 ? w[0] : concat(w, 0));
  if (!bias.empty()) bias_ = register_parameter("bias", blocks_ == 1 ? bias[0] : concat(bias, 0));
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  Tensor y = column_product(x, weight_, tp_, o_);
  if (bias_.defined()) y = add(y, bias_);  // the whole sequence's rows: no sum over ranks
  return gather_ ? gather_last_dim(y, tp_, widths_) : y;
}

void ColumnParallelLinear::add_specs(const std::string& prefix, ShardSpecs& specs) const {
  specs[prefix + "weight"] = {.dim = 0, .full_shape = {out_, in_}, .offset = offset_, .blocks = blocks_};
  if (bias_.defined()) specs[prefix + "bias"] = {.dim = 0, .full_shape = {out_}, .offset = offset_, .blocks = blocks_};
}

RowParallelLinear::RowParallelLinear(const nn::Linear& whole, comm::Communicator tp, TpOptions o)
    : tp_(std::move(tp)), o_(std::move(o)) {
  out_ = whole.weight().size(0), in_ = whole.weight().size(1);
  if (in_ < tp_.size()) fail<ConfigError>("tensor parallel: {} inputs cannot be split {} ways", in_, tp_.size());
  const auto [b, e] = shard_range(in_, tp_.size(), tp_.rank());
  offset_ = b;
  weight_ = register_parameter("weight", rows(whole.weight(), 1, b, e));
  if (whole.bias().defined()) bias_ = register_parameter("bias", whole.bias().detach().clone());
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  Tensor y = row_product(x, weight_, tp_, o_);
  if (!bias_.defined()) return y;
  // On a segment the bias sees this rank's tokens only: its gradient is summed over the ranks.
  return add(y, o_.sequence_parallel ? copy_to_tensor_parallel(bias_, tp_) : bias_);
}

void RowParallelLinear::add_specs(const std::string& prefix, ShardSpecs& specs) const {
  specs[prefix + "weight"] = {.dim = 1, .full_shape = {out_, in_}, .offset = offset_};
}

ParallelAttention::ParallelAttention(const nn::MultiHeadAttention& whole, comm::Communicator tp, TpOptions o)
    : tp_(std::move(tp)), o_(std::move(o)), dim_(whole.dim()), heads_(whole.heads()), causal_(whole.options().causal),
      rope_theta_(whole.options().rope_theta) {
  const int t = tp_.size();
  if (whole.kv_heads() != heads_) {
    fail<ConfigError>("tensor parallel: grouped-query attention ({} key/value heads for {} heads) is not split over "
                      "parallel.tensor yet; set model.kv_heads = {} or parallel.tensor = 1",
                      whole.kv_heads(), heads_, heads_);
  }
  if (heads_ % t != 0) {
    fail<ConfigError>("tensor parallel: {} attention heads cannot be split evenly over parallel.tensor = {}", heads_, t);
  }
  local_heads_ = heads_ / t, head_dim_ = dim_ / heads_;
  const auto [b, e] = shard_range(dim_, t, tp_.rank());  // this rank's heads' features
  // in_proj packs [3, H, hd] on its outputs: take this rank's heads of q, k and v.
  std::vector<Tensor> w, bias;
  for (int part = 0; part < 3; ++part) {
    w.push_back(rows(whole.in_proj()->weight(), 0, part * dim_ + b, part * dim_ + e));
    if (whole.in_proj()->bias().defined()) bias.push_back(rows(whole.in_proj()->bias(), 0, part * dim_ + b, part * dim_ + e));
  }
  auto in = std::make_shared<Holder>();
  in->add("weight", concat(w, 0));
  if (!bias.empty()) in->add("bias", concat(bias, 0));
  in_proj_ = register_module("in_proj", in);
  out_proj_ = register_module("out_proj", std::make_shared<RowParallelLinear>(*whole.out_proj(), tp_, o_));
  const Generator* base = whole.dropout()->generator();
  drop_gen_ = std::make_unique<Generator>(base ? base->state().seed : 0, 1000 + static_cast<uint64_t>(tp_.rank()));
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(whole.dropout()->p(), drop_gen_.get()));
}

Tensor ParallelAttention::forward(const Tensor& x) {
  if (x.ndim() != 3 || x.size(2) != dim_) {
    fail<ValueError>("ParallelAttention: expects [B, T, {}], got {}", dim_, to_string(x.shape()));
  }
  const auto params = in_proj_->named_parameters();
  const Tensor& w = params.at(0).second;
  const Tensor b = params.size() > 1 ? params.at(1).second : Tensor();
  // Under sequence parallelism x is this rank's segment and qkv covers the whole sequence.
  Tensor qkv = column_product(x, w, tp_, o_);
  if (b.defined()) qkv = add(qkv, b);
  if (recompute_ != nn::Recompute::selective || !nn::attend_keeps_scores(qkv)) {
    return out_proj_->forward(nn::attend(qkv, local_heads_, local_heads_, causal_, rope_theta_, drop_.get()));
  }
  nn::Rematerialized core(
      [this](const Tensor& v) { return nn::attend(v, local_heads_, local_heads_, causal_, rope_theta_, drop_.get()); },
      qkv, nn::dropout_generators(*drop_));
  return core.release_after(out_proj_->forward(core.output()));
}

void ParallelAttention::add_specs(const std::string& prefix, ShardSpecs& specs) const {
  const int64_t offset = shard_range(dim_, tp_.size(), tp_.rank()).first;
  for (const auto& [name, t] : in_proj_->named_parameters()) {
    Shape full = t.shape();
    full[0] = 3 * dim_;
    specs[prefix + "in_proj." + name] = {.dim = 0, .full_shape = full, .offset = offset, .blocks = 3};
  }
  std::static_pointer_cast<RowParallelLinear>(out_proj_)->add_specs(prefix + "out_proj.", specs);
}

ParallelTransformerBlock::ParallelTransformerBlock(const nn::TransformerBlock& whole, comm::Communicator tp,
                                                   TpOptions o) {
  const bool sp = o.sequence_parallel;
  auto norm = [&](const std::shared_ptr<nn::Module>& n) {
    return sp ? std::shared_ptr<nn::Module>(std::make_shared<SequenceParallelNorm>(n, tp)) : n;
  };
  ln1_ = register_module("ln1", norm(whole.ln1()));
  attn_ = register_module("attn", std::make_shared<ParallelAttention>(*whole.attn(), tp, o));
  ln2_ = register_module("ln2", norm(whole.ln2()));
  mlp_ = whole.block_options().mlp;
  if (whole.moe() && sp) {
    fail<ConfigError>("parallel.sequence_parallel with a mixture-of-experts layer (model.moe.experts > 0) is not "
                      "built: the experts run on whole sequences (set parallel.sequence_parallel = false)");
  }
  if (whole.moe()) {
    // The attention's output is whole on every tensor rank, so each runs the same experts on it
    // (experts split over ranks is expert parallelism's job, on the data axis).
    moe_ = register_module("moe", whole.moe());
  } else {
    // SwiGLU's fc1 holds gate and up side by side: each rank takes its slice of both.
    fc1_ = register_module("fc1", std::make_shared<ColumnParallelLinear>(*whole.fc1(), tp, /*gather_output=*/false,
                                                                          mlp_ == nn::MlpKind::swiglu ? 2 : 1, o));
    fc2_ = register_module("fc2", std::make_shared<RowParallelLinear>(*whole.fc2(), tp, o));
  }
  if (sp) {
    // Each rank drops elements of its own tokens: a stream of this tensor rank's own.
    const Generator* base = whole.dropout()->generator();
    drop_gen_ = std::make_unique<Generator>(base ? base->state().seed : 0, 2000 + static_cast<uint64_t>(tp.rank()));
    drop_ = register_module("drop", std::make_shared<nn::Dropout>(whole.dropout()->p(), drop_gen_.get()));
  } else {
    drop_ = register_module("drop", whole.dropout());
  }
}

Tensor ParallelTransformerBlock::forward(const Tensor& x) {
  if (moe_) {  // as nn::TransformerBlock's MoE blocks, recompute leaves them alone
    Tensor h = add(x, drop_->forward(attn_->forward(ln1_->forward(x))));
    return add(h, drop_->forward(moe_->forward(ln2_->forward(h))));
  }
  auto body = [this](const Tensor& v, nn::Recompute mode) {
    return nn::TransformerBlock::residual_body(v, *ln1_, *attn_, *ln2_, *fc1_, *fc2_, *drop_, mlp_, mode);
  };
  if (recompute_ == nn::Recompute::full) {
    return nn::checkpoint_module(*this, x, [body](const Tensor& v) { return body(v, nn::Recompute::none); });
  }
  return body(x, recompute_);
}

void ParallelTransformerBlock::set_recompute(nn::Recompute mode) {
  recompute_ = mode;
  attn_->set_recompute(mode == nn::Recompute::selective ? mode : nn::Recompute::none);
}

void ParallelTransformerBlock::add_specs(const std::string& prefix, ShardSpecs& specs) const {
  attn_->add_specs(prefix + "attn.", specs);
  if (moe_) return;  // replicated
  fc1_->add_specs(prefix + "fc1.", specs);
  fc2_->add_specs(prefix + "fc2.", specs);
}

ParallelTokenPositionEmbedding::ParallelTokenPositionEmbedding(const nn::TokenPositionEmbedding& whole,
                                                               comm::Communicator tp, TpOptions o)
    : tp_(std::move(tp)), o_(std::move(o)) {
  const Tensor& table = whole.tok()->weight();
  vocab_ = table.size(0);
  if (vocab_ < tp_.size()) fail<ConfigError>("tensor parallel: a vocabulary of {} cannot be split {} ways", vocab_, tp_.size());
  std::tie(begin_, end_) = shard_range(vocab_, tp_.size(), tp_.rank());
  auto tok = std::make_shared<Holder>();
  tok_weight_ = tok->add("weight", rows(table, 0, begin_, end_));
  tok_ = register_module("tok", std::static_pointer_cast<nn::Module>(tok));
  if (whole.pos().defined()) pos_ = register_parameter("pos", whole.pos());
  Generator* gen = whole.dropout_generator();
  if (o_.sequence_parallel) {  // each rank drops elements of its own tokens
    drop_gen_ = std::make_unique<Generator>(gen ? gen->state().seed : 0, 3000 + static_cast<uint64_t>(tp_.rank()));
    gen = drop_gen_.get();
  }
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(whole.dropout(), gen));
}

Tensor ParallelTokenPositionEmbedding::forward(const Tensor& tokens) {
  if (tokens.ndim() != 2 || (pos_.defined() && tokens.size(1) > pos_.size(0))) {
    fail<ValueError>("ParallelTokenPositionEmbedding: expects [B, T <= {}] tokens, got {}",
                     pos_.defined() ? pos_.size(0) : 0, to_string(tokens.shape()));
  }
  // Tokens outside this rank's rows look up row 0 and are zeroed.
  const Tensor tk = tokens.to(DType::i64).contiguous();
  Tensor local = Tensor::empty(tk.shape(), DType::i64);
  Shape mask_shape = tk.shape();
  mask_shape.push_back(1);
  Tensor mask = Tensor::empty(mask_shape, DType::f32);
  const int64_t* in = tk.data<int64_t>();
  int64_t* out = local.data<int64_t>();
  float* m = mask.data<float>();
  for (int64_t i = 0; i < tk.numel(); ++i) {
    if (in[i] < 0 || in[i] >= vocab_) fail<IndexError>("embedding: token {} outside [0, {})", in[i], vocab_);
    const bool mine = in[i] >= begin_ && in[i] < end_;
    out[i] = mine ? in[i] - begin_ : 0;
    m[i] = mine ? 1.0f : 0.0f;
  }
  const Tensor rows_here = mul(embedding(tok_weight_, local), mask);
  if (!o_.sequence_parallel) {
    Tensor x = reduce_from_tensor_parallel(rows_here, tp_);
    if (pos_.defined()) x = add(x, slice(pos_, 0, 0, tokens.size(1)));
    return drop_->forward(x);
  }
  // This rank's segment of the summed rows, its positions (the table's
  // gradient summed over the ranks: each adds its segment's rows).
  Tensor x = reduce_scatter_sequence(rows_here, tp_);
  if (pos_.defined()) {
    const int64_t seg = x.size(1), begin = seg * tp_.rank();
    x = add(x, slice(copy_to_tensor_parallel(pos_, tp_), 0, begin, begin + seg));
  }
  return drop_->forward(x);
}

void ParallelTokenPositionEmbedding::add_specs(const std::string& prefix, ShardSpecs& specs) const {
  specs[prefix + "tok.weight"] = {.dim = 0, .full_shape = {vocab_, tok_weight_.size(1)}, .offset = begin_};
}

ParallelTiedHead::ParallelTiedHead(std::shared_ptr<ParallelTokenPositionEmbedding> embedding, comm::Communicator tp,
                                   TpOptions o)
    : embedding_(std::move(embedding)), tp_(std::move(tp)), o_(std::move(o)),
      widths_(widths_of(embedding_->vocab(), tp_.size())) {}

Tensor ParallelTiedHead::forward(const Tensor& x) { return column_product(x, embedding_->table(), tp_, o_); }

}  // namespace braid::parallel::tensor_parallel
