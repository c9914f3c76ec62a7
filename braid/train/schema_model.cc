// [model]: which network to build and its sizes.
#include "braid/train/schema.h"

namespace braid::train {

void add_model_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "model.name", .type = T::String, .default_value = std::string("cnn"),
         .help = "mlp (784-hidden-hidden-10), cnn (2 conv + 2 fc), char_transformer (causal LM), sparse_linear "
                 "(embedding-bag + linear over libsvm features, through parameter servers)",
         .choices = {"mlp", "cnn", "char_transformer", "sparse_linear"}});
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
         .help = "cnn: batch norm after each convolution over each replica's own batch (batch), the whole batch "
                 "across the data-parallel replicas (sync_batch) or runs of model.ghost_batch examples (ghost_batch); "
                 "mlp and cnn: weight = weight normalisation of every linear and convolution layer; none",
         .choices = {"none", "batch", "sync_batch", "ghost_batch", "weight"}});
  s.add({.name = "model.ghost_batch", .type = T::Int, .default_value = int64_t{16},
         .help = "model.norm = ghost_batch: examples per ghost batch", .min = 1});
}

}  // namespace braid::train
