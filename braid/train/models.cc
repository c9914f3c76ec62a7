#include "braid/train/models.h"

#include <cmath>

#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/dropout.h"
#include "braid/nn/init.h"
#include "braid/nn/conv.h"
#include "braid/nn/linear.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"

namespace braid::train {

namespace {

std::shared_ptr<nn::Module> mlp(const Config& c, const ModelInfo& info, Generator& gen) {
  const int64_t in = numel(info.input_shape), h = c.get_int("model.hidden");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(in, h, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(h, h, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(h, info.classes, gen));
  return m;
}

std::shared_ptr<nn::Module> cnn(const ModelInfo& info, Generator& gen) {
  if (info.input_shape.size() != 3) {
    fail<ConfigError>("model.name = cnn needs image inputs [C, H, W], the dataset gives {}", to_string(info.input_shape));
  }
  const int64_t c = info.input_shape[0];
  // Two (conv 3x3 valid, pool 2) stages: 28 -> 26 -> 13 -> 11 -> 5.
  auto out = [](int64_t s) { return ((s - 2) / 2 - 2) / 2; };
  const int64_t h = out(info.input_shape[1]), w = out(info.input_shape[2]);
  if (h <= 0 || w <= 0) fail<ConfigError>("model.name = cnn needs images of at least 10x10");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(c, 32, std::array<int64_t, 2>{3, 3}, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Conv2d>(32, 64, std::array<int64_t, 2>{3, 3}, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(64 * h * w, 128, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(128, info.classes, gen));
  return m;
}

// A GPT-style character model: token + learned position embeddings, causal
// blocks, final LayerNorm, linear head. [B, T] i64 -> [B, T, vocab].
class CharTransformer final : public nn::Module {
 public:
  CharTransformer(int64_t vocab, int64_t context, int64_t dim, int64_t heads, int64_t layers, double dropout,
                  Generator& gen, Generator* dropout_gen) {
    tok_ = register_module("tok", std::make_shared<nn::Embedding>(vocab, dim, gen));
    pos_ = register_parameter("pos", Tensor::empty({context, dim}));
    nn::init::normal_(pos_, 0, 0.02, gen);
    drop_ = register_module("drop", std::make_shared<nn::Dropout>(dropout, dropout_gen));
    blocks_ = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < layers; ++i) {
      blocks_->push_back(std::make_shared<nn::TransformerBlock>(
          dim, heads, gen, nn::AttentionOptions{.causal = true, .dropout = dropout, .generator = dropout_gen}));
    }
    ln_ = register_module("ln", std::make_shared<nn::LayerNorm>(Shape{dim}));
    head_ = register_module("head", std::make_shared<nn::Linear>(dim, vocab, gen));
  }
  Tensor forward(const Tensor& tokens) override {
    if (tokens.ndim() != 2 || tokens.size(1) > pos_.size(0)) {
      fail<ValueError>("char_transformer: expects [B, T <= {}] tokens, got {}", pos_.size(0), to_string(tokens.shape()));
    }
    Tensor x = add(tok_->forward(tokens), slice(pos_, 0, 0, tokens.size(1)));  // [B, T, D] + [T, D]
    return head_->forward(ln_->forward(blocks_->forward(drop_->forward(x))));
  }

 private:
  std::shared_ptr<nn::Embedding> tok_;
  Tensor pos_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::Sequential> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::Linear> head_;
};

std::shared_ptr<nn::Module> char_transformer(const Config& c, const ModelInfo& info, Generator& gen) {
  if (info.input_shape.size() != 1) {
    fail<ConfigError>("model.name = char_transformer needs token sequences [T], the dataset gives {}",
                      to_string(info.input_shape));
  }
  const int64_t dim = c.get_int("model.d_model"), heads = c.get_int("model.n_heads");
  if (dim % heads != 0) fail<ConfigError>("model.n_heads = {} must divide model.d_model = {}", heads, dim);
  return std::make_shared<CharTransformer>(info.classes, info.input_shape[0], dim, heads, c.get_int("model.n_layers"),
                                           c.get_float("model.dropout"), gen, info.dropout_generator);
}

}  // namespace

std::shared_ptr<nn::Module> build_model(const Config& config, const ModelInfo& info, Generator& gen) {
  if (info.classes <= 0) fail<ConfigError>("the dataset defines no classes to predict");
  const std::string& name = config.get_string("model.name");
  if (name == "mlp") return mlp(config, info, gen);
  if (name == "cnn") return cnn(info, gen);
  if (name == "char_transformer") return char_transformer(config, info, gen);
  fail<ConfigError>("model.name = {} is not available", name);
}

}  // namespace braid::train
