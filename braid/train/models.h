// The models `braid train` builds by name (config key model.name).
//
//   mlp  [n, 1, 28, 28] -> flatten -> Linear(784, h) ReLU Linear(h, h) ReLU Linear(h, classes)
//   cnn  Conv(1->32, 3x3) ReLU MaxPool(2) Conv(32->64, 3x3) ReLU MaxPool(2)
//        Flatten Linear(1600, 128) ReLU Linear(128, classes)     (28x28 inputs)
//   char_transformer  TokenPositionEmbedding, n_layers causal TransformerBlocks,
//        LayerNorm, Linear(d_model, vocab): [n, T] tokens -> [n, T, vocab]
//
// model.dropout > 0 adds a Dropout after each hidden ReLU of mlp and after the
// cnn's first fully connected ReLU (the transformer drops inside its blocks);
// model.norm = weight reparameterises every Linear and Conv of mlp and cnn.
// Each model reads only the model.* keys it uses (Config::refuse_unread).
//
// Every model is an nn::Sequential (a pipeline cuts it between layers).
// Parameter names follow torch.nn.Sequential ("0.weight", "3.bias", ...), so
// bench/train/train_vs_pytorch.py builds the identical torch model.
#pragma once

#include <memory>

#include "braid/base/rng.h"
#include "braid/nn/module.h"
#include "braid/train/config.h"

namespace braid::train {

struct ModelInfo {
  Shape input_shape;    // one example, e.g. {1, 28, 28}
  int64_t classes = 0;  // output classes / vocabulary size
  Generator* dropout_generator = nullptr;  // masks of Dropout layers (the trainer's, to checkpoint it)
};

// Weights drawn from gen (see nn/init.h). ConfigError for a model that does
// not fit the data (e.g. cnn on non-image inputs).
std::shared_ptr<nn::Module> build_model(const Config& config, const ModelInfo& info, Generator& gen);

}  // namespace braid::train
