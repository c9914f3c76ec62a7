#include "braid/train/models.h"

#include <cmath>

#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/dropout.h"
#include "braid/nn/init.h"
#include "braid/nn/conv.h"
#include "braid/nn/linear.h"
#include "braid/nn/norm.h"
#include "braid/nn/weight_norm.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "braid/train/model_families.h"

namespace braid::train {

namespace {

// model.dropout after each hidden activation (as torch.nn.Dropout would sit);
// nothing at 0, so the layer names of a model without dropout stay put.
void maybe_dropout(nn::Sequential& m, double p, const ModelInfo& info) {
  if (p > 0) m.push_back(std::make_shared<nn::Dropout>(p, info.dropout_generator));
}

std::shared_ptr<nn::Module> mlp(const Config& c, const ModelInfo& info, Generator& gen) {
  const int64_t in = numel(info.input_shape), h = c.get_int("model.hidden");
  const double dropout = c.get_float("model.dropout");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(in, h, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  maybe_dropout(*m, dropout, info);
  m->push_back(std::make_shared<nn::Linear>(h, h, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  maybe_dropout(*m, dropout, info);
  m->push_back(std::make_shared<nn::Linear>(h, info.classes, gen));
  return m;
}

// model.norm after a convolution of `channels` outputs, or nothing.
std::shared_ptr<nn::Module> norm_layer(const Config& c, int64_t channels) {
  const std::string& norm = c.get_string("model.norm");
  if (norm == "none" || norm == "weight") return nullptr;
  // sync_batch is a plain BatchNorm2d here; the plan synchronises it over the data axis.
  return std::make_shared<nn::BatchNorm2d>(
      channels, nn::BatchNormLayerOptions{.ghost_batch = norm == "ghost_batch" ? c.get_int("model.ghost_batch") : 0});
}

std::shared_ptr<nn::Module> cnn(const Config& c, const ModelInfo& info, Generator& gen) {
  if (info.input_shape.size() != 3) {
    fail<ConfigError>("model.name = cnn needs image inputs [C, H, W], the dataset gives {}", to_string(info.input_shape));
  }
  const int64_t channels = info.input_shape[0];
  // Two (conv 3x3 valid, pool 2) stages: 28 -> 26 -> 13 -> 11 -> 5.
  auto out = [](int64_t s) { return ((s - 2) / 2 - 2) / 2; };
  const int64_t h = out(info.input_shape[1]), w = out(info.input_shape[2]);
  if (h <= 0 || w <= 0) fail<ConfigError>("model.name = cnn needs images of at least 10x10");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(channels, 32, std::array<int64_t, 2>{3, 3}, gen));
  if (auto n = norm_layer(c, 32)) m->push_back(n);
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Conv2d>(32, 64, std::array<int64_t, 2>{3, 3}, gen));
  if (auto n = norm_layer(c, 64)) m->push_back(n);
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(64 * h * w, 128, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  maybe_dropout(*m, c.get_float("model.dropout"), info);
  m->push_back(std::make_shared<nn::Linear>(128, info.classes, gen));
  return m;
}

std::shared_ptr<nn::Module> char_transformer(const Config& c, const ModelInfo& info, Generator& gen) {
  if (info.input_shape.size() != 1) {
    fail<ConfigError>("model.name = char_transformer needs token sequences [T], the dataset gives {}",
                      to_string(info.input_shape));
  }
  const int64_t dim = c.get_int("model.d_model"), heads = c.get_int("model.n_heads");
  if (dim % heads != 0) fail<ConfigError>("model.n_heads = {} must divide model.d_model = {}", heads, dim);
  const double dropout = c.get_float("model.dropout");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::TokenPositionEmbedding>(info.classes, info.input_shape[0], dim, gen, dropout,
                                                            info.dropout_generator));
  for (int64_t i = 0; i < c.get_int("model.n_layers"); ++i) {
    m->push_back(std::make_shared<nn::TransformerBlock>(
        dim, heads, gen, nn::AttentionOptions{.causal = true, .dropout = dropout, .generator = info.dropout_generator}));
  }
  m->push_back(std::make_shared<nn::LayerNorm>(Shape{dim}));
  m->push_back(std::make_shared<nn::Linear>(dim, info.classes, gen));
  return m;
}

}  // namespace

std::shared_ptr<nn::Module> build_model(const Config& config, const ModelInfo& info, Generator& gen) {
  if (info.classes <= 0) fail<ConfigError>("the dataset defines no classes to predict");
  const std::string& name = config.get_string("model.name");
  const std::string& norm = config.get_string("model.norm");
  // Batch norm sits after convolutions (the cnn's, resnet's); weight normalisation
  // reparameterises every linear and convolution layer (mlp and cnn).
  const bool batch_norm = norm == "batch" || norm == "sync_batch" || norm == "ghost_batch";
  if (batch_norm && name != "cnn" && name != "resnet") {
    fail<ConfigError>("model.norm = {} adds batch norm after convolutions: model.name = cnn or resnet, not {}", norm,
                      name);
  }
  if ((norm == "layer" || norm == "rms") && name != "gpt") {
    fail<ConfigError>("model.norm = {} chooses the norm of a gpt's blocks, not of {}", norm, name);
  }
  if (norm == "weight" && name != "mlp" && name != "cnn") {
    fail<ConfigError>("model.norm = weight applies to mlp and cnn, not {}", name);
  }
  std::shared_ptr<nn::Module> m;
  if (name == "mlp") m = mlp(config, info, gen);
  else if (name == "cnn") m = cnn(config, info, gen);
  else if (name == "char_transformer") m = char_transformer(config, info, gen);
  else if (name == "resnet") m = build_resnet(config, info, gen);
  else if (name == "gpt") m = build_gpt(config, info, gen);
  else fail<ConfigError>("model.name = {} is not available to braid train", name);
  if (norm == "weight") nn::apply_weight_norm(static_cast<nn::Sequential&>(*m));
  return m;
}

}  // namespace braid::train
