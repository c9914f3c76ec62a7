// [model]: which network to build and its sizes.
#include "braid/train/schema.h"

namespace braid::train {

void add_model_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "model.name", .type = T::String, .default_value = std::string("cnn"),
         .help = "mlp (784-hidden-hidden-10), cnn (2 conv + 2 fc), char_transformer (causal LM), sparse_linear "
                 "(embedding-bag + linear over libsvm features, through parameter servers), gpt (decoder-only language model: "
                 "GPT-2 and LLaMA layouts, see docs/models.md), resnet (torchvision's "
                 "ResNet-18/34/50 over images)",
         .choices = {"mlp", "cnn", "char_transformer", "sparse_linear", "gpt", "resnet"}});
  s.add({.name = "model.hidden", .type = T::Int, .default_value = int64_t{256},
         .help = "hidden width of the MLP; embedding width of sparse_linear", .min = 1});
  s.add({.name = "model.d_model", .type = T::Int, .default_value = int64_t{128},
         .help = "transformer embedding width", .min = 1});
  s.add({.name = "model.n_heads", .type = T::Int, .default_value = int64_t{4},
         .help = "attention heads (must divide d_model)", .min = 1});
  s.add({.name = "model.n_layers", .type = T::Int, .default_value = int64_t{2},
         .help = "transformer blocks", .min = 1});
  s.add({.name = "model.context", .type = T::Int, .default_value = int64_t{64},
         .help = "tokens per training sequence (char_transformer)", .min = 1});
  s.add({.name = "model.dropout", .type = T::Float, .default_value = 0.0,
         .help = "dropout probability: mlp after each hidden ReLU, cnn after its fully connected ReLU, char_transformer "
                 "in its embedding, attention and blocks", .min = 0.0, .max = 1.0});
  s.add({.name = "model.norm", .type = T::String, .default_value = std::string("none"),
         .help = "cnn and resnet (which needs one of the three): batch norm after each convolution over each "
                 "replica's own batch (batch), the whole batch "
                 "across the data-parallel replicas (sync_batch) or runs of model.ghost_batch examples (ghost_batch); "
                 "mlp and cnn: weight = weight normalisation of every linear and convolution layer; gpt: layer (LayerNorm, "
                 "GPT-2; what none means for gpt) or rms (RMSNorm, LLaMA); none",
         .choices = {"none", "batch", "sync_batch", "ghost_batch", "weight", "layer", "rms"}});
  s.add({.name = "model.depth", .type = T::Int, .default_value = int64_t{18},
         .help = "resnet: 18 or 34 (basic blocks), 50 (bottlenecks)", .min = 18, .max = 50});
  s.add({.name = "model.stem", .type = T::String, .default_value = std::string("imagenet"),
         .help = "resnet: imagenet (7x7/2 conv, 3x3/2 max pool; 224x224 inputs) or small (3x3/1 conv, no pool; "
                 "28x28 and 32x32 inputs)",
         .choices = {"imagenet", "small"}});
  s.add({.name = "model.zero_init_residual", .type = T::Bool, .default_value = false,
         .help = "resnet: the last batch norm of each block starts at weight 0 (each block starts as the identity)"});
  // gpt (model.d_model, n_heads, n_layers, context and dropout as for char_transformer).
  s.add({.name = "model.kv_heads", .type = T::Int, .default_value = int64_t{0},
         .help = "gpt: key/value heads; 0 = model.n_heads, fewer (dividing n_heads) = grouped-query attention", .min = 0});
  s.add({.name = "model.mlp_ratio", .type = T::Float, .default_value = 4.0,
         .help = "gpt: MLP width as a multiple of d_model (unless model.mlp_hidden is set)", .min = 0.0});
  s.add({.name = "model.mlp_hidden", .type = T::Int, .default_value = int64_t{0},
         .help = "gpt: MLP width; 0 = mlp_ratio x d_model", .min = 0});
  s.add({.name = "model.norm_eps", .type = T::Float, .default_value = 1e-5,
         .help = "gpt: epsilon of the norms", .min = 0.0});
  s.add({.name = "model.position", .type = T::String, .default_value = std::string("learned"),
         .help = "gpt: learned position embeddings (GPT-2) or rope (rotary, LLaMA)", .choices = {"learned", "rope"}});
  s.add({.name = "model.rope_theta", .type = T::Float, .default_value = 10000.0,
         .help = "gpt, position = rope: the base of the rotary frequencies", .min = 1.0});
  s.add({.name = "model.activation", .type = T::String, .default_value = std::string("gelu_tanh"),
         .help = "gpt: the MLP's activation: gelu (exact), gelu_tanh (GPT-2's tanh approximation) or swiglu (LLaMA's "
                 "gated unit)",
         .choices = {"gelu", "gelu_tanh", "swiglu"}});
  s.add({.name = "model.bias", .type = T::Bool, .default_value = true,
         .help = "gpt: biases on the attention and MLP linears (GPT-2 true, LLaMA false)"});
  s.add({.name = "model.tie_embeddings", .type = T::Bool, .default_value = true,
         .help = "gpt: the output head reads the token embedding table (GPT-2) instead of a weight of its own"});
  s.add({.name = "model.vocab", .type = T::Int, .default_value = int64_t{0},
         .help = "gpt: vocabulary size; 0 = the dataset's (a token shard's header); larger pads the table", .min = 0});
  // gpt: mixture of experts (docs/moe.md).
  s.add({.name = "model.moe.experts", .type = T::Int, .default_value = int64_t{0},
         .help = "gpt: experts of each mixture-of-experts MLP; 0 = dense MLPs", .min = 0});
  s.add({.name = "model.moe.top_k", .type = T::Int, .default_value = int64_t{2},
         .help = "gpt, moe.experts > 0: experts each token is routed to (at most moe.experts)", .min = 1});
  s.add({.name = "model.moe.every", .type = T::Int, .default_value = int64_t{1},
         .help = "gpt, moe.experts > 0: every n-th block (the n-th, 2n-th, ...) has an MoE MLP, the others dense",
         .min = 1});
  s.add({.name = "model.moe.capacity_factor", .type = T::Float, .default_value = 0.0,
         .help = "gpt, moe.experts > 0: each expert takes at most ceil(factor x tokens x top_k / experts) "
                 "assignments per batch, the rest are dropped; 0 = dropless", .min = 0.0});
  s.add({.name = "model.moe.shared_experts", .type = T::Int, .default_value = int64_t{0},
         .help = "gpt, moe.experts > 0: a dense MLP of this many experts' width every token passes through", .min = 0});
  s.add({.name = "model.moe.aux_loss", .type = T::Float, .default_value = 0.01,
         .help = "gpt, moe.experts > 0: coefficient of the load-balancing loss (Switch's E sum f_e P_e)", .min = 0.0});
  s.add({.name = "model.moe.balance", .type = T::String, .default_value = std::string("aux_loss"),
         .help = "gpt, moe.experts > 0: how the router is balanced: aux_loss (the load-balancing loss) or bias "
                 "(DeepSeek-V3's auxiliary-loss-free per-expert bias on the top-k choice)",
         .choices = {"aux_loss", "bias"}});
  s.add({.name = "model.moe.bias_rate", .type = T::Float, .default_value = 0.001,
         .help = "gpt, moe.balance = bias: each step moves an expert's bias by this toward balance", .min = 0.0});
  s.add({.name = "model.moe.z_loss", .type = T::Float, .default_value = 0.001,
         .help = "gpt, moe.experts > 0: coefficient of the router z-loss (mean logsumexp^2)", .min = 0.0});
  s.add({.name = "model.ghost_batch", .type = T::Int, .default_value = int64_t{16},
         .help = "model.norm = ghost_batch: examples per ghost batch", .min = 1});
}

}  // namespace braid::train
