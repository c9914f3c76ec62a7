#include "braid/models/resnet.h"

#include <cmath>
#include <string>

#include "braid/nn/activation.h"
#include "braid/nn/init.h"
#include "braid/nn/linear.h"
#include "braid/ops/activation.h"
#include "braid/ops/elementwise.h"

namespace braid::models {

namespace {

using K = std::array<int64_t, 2>;

// A bias-free k x k convolution with torchvision's init: N(0, 2 / fan_out),
// fan_out = out * k * k (He et al. for the backward pass).
std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride, Generator& gen) {
  auto c = std::make_shared<nn::Conv2d>(
      in, out, K{k, k}, gen,
      nn::Conv2dLayerOptions{.stride = {stride, stride}, .padding = {k / 2, k / 2}, .bias = false});
  nn::init::normal_(c->weight(), 0.0, std::sqrt(2.0 / static_cast<double>(out * k * k)), gen);
  return c;
}

std::shared_ptr<nn::BatchNorm2d> bn(int64_t channels, const ResNetConfig& config) {
  return std::make_shared<nn::BatchNorm2d>(channels, config.norm);
}

// 1x1/stride conv + bn when the block's output differs from its input in
// resolution or width; null (identity) otherwise.
std::shared_ptr<nn::Sequential> downsample(int64_t in, int64_t out, int64_t stride, const ResNetConfig& config,
                                           Generator& gen) {
  if (stride == 1 && in == out) return nullptr;
  auto d = std::make_shared<nn::Sequential>();
  d->push_back(conv(in, out, 1, stride, gen));
  d->push_back(bn(out, config));
  return d;
}

// The last batch norm of a block starts at weight 0 under zero_init_residual.
void zero_weight(const nn::BatchNorm2d& b) {
  for (const auto& [name, t] : b.named_parameters()) {
    if (name == "weight") t.fill(0.0);
  }
}

// relu(y + shortcut), the end of every block.
Tensor join(const Tensor& y, const Tensor& shortcut) { return relu(add(y, shortcut)); }

}  // namespace

ResNetStem parse_resnet_stem(std::string_view text) {
  if (text == "imagenet") return ResNetStem::imagenet;
  if (text == "small") return ResNetStem::small;
  fail<ValueError>("ResNet stem '{}' is not imagenet (7x7/2 conv, 3x3/2 max pool) or small (3x3/1 conv)", text);
}

void ResNetConfig::validate() const {
  if (depth != 18 && depth != 34 && depth != 50) {
    fail<ValueError>("ResNet depth {} is not available: 18, 34 (basic blocks) or 50 (bottlenecks)", depth);
  }
  if (classes < 1) fail<ValueError>("ResNet classes must be >= 1, got {}", classes);
  if (in_channels < 1) fail<ValueError>("ResNet in_channels must be >= 1, got {}", in_channels);
}

std::array<int, 4> ResNetConfig::blocks() const {
  if (depth == 18) return {2, 2, 2, 2};
  return {3, 4, 6, 3};  // 34 and 50
}

BasicBlock::BasicBlock(int64_t in, int64_t planes, int64_t stride, const ResNetConfig& config, Generator& gen) {
  conv1_ = register_module("conv1", conv(in, planes, 3, stride, gen));
  bn1_ = register_module("bn1", bn(planes, config));
  conv2_ = register_module("conv2", conv(planes, planes, 3, 1, gen));
  bn2_ = register_module("bn2", bn(planes, config));
  if (auto d = downsample(in, planes, stride, config, gen)) downsample_ = register_module("downsample", d);
  if (config.zero_init_residual) zero_weight(*bn2_);
}

Tensor BasicBlock::forward(const Tensor& x) {
  const Tensor y = (*bn2_)((*conv2_)(relu((*bn1_)((*conv1_)(x)))));
  return join(y, downsample_ ? (*downsample_)(x) : x);
}

Bottleneck::Bottleneck(int64_t in, int64_t planes, int64_t stride, const ResNetConfig& config, Generator& gen) {
  conv1_ = register_module("conv1", conv(in, planes, 1, 1, gen));
  bn1_ = register_module("bn1", bn(planes, config));
  conv2_ = register_module("conv2", conv(planes, planes, 3, stride, gen));
  bn2_ = register_module("bn2", bn(planes, config));
  conv3_ = register_module("conv3", conv(planes, planes * 4, 1, 1, gen));
  bn3_ = register_module("bn3", bn(planes * 4, config));
  if (auto d = downsample(in, planes * 4, stride, config, gen)) downsample_ = register_module("downsample", d);
  if (config.zero_init_residual) zero_weight(*bn3_);
}

Tensor Bottleneck::forward(const Tensor& x) {
  const Tensor h = relu((*bn2_)((*conv2_)(relu((*bn1_)((*conv1_)(x))))));
  return join((*bn3_)((*conv3_)(h)), downsample_ ? (*downsample_)(x) : x);
}

std::shared_ptr<nn::Sequential> resnet(const ResNetConfig& config, Generator& gen) {
  config.validate();
  auto m = std::make_shared<nn::Sequential>();
  if (config.stem == ResNetStem::imagenet) {
    m->push_back("conv1", conv(config.in_channels, 64, 7, 2, gen));
  } else {
    m->push_back("conv1", conv(config.in_channels, 64, 3, 1, gen));
  }
  m->push_back("bn1", bn(64, config));
  m->push_back("relu", std::make_shared<nn::ReLU>());
  if (config.stem == ResNetStem::imagenet) {
    m->push_back("maxpool",
                 std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}));
  }
  const std::array<int, 4> blocks = config.blocks();
  int64_t in = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = int64_t{64} << s;
    auto stage = std::make_shared<nn::Sequential>();
    for (int b = 0; b < blocks[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      if (config.expansion() == 1) stage->push_back(std::make_shared<BasicBlock>(in, planes, stride, config, gen));
      else stage->push_back(std::make_shared<Bottleneck>(in, planes, stride, config, gen));
      in = planes * config.expansion();
    }
    m->push_back("layer" + std::to_string(s + 1), stage);
  }
  m->push_back("avgpool", std::make_shared<nn::GlobalAvgPool2d>());
  m->push_back("fc", std::make_shared<nn::Linear>(in, config.classes, gen));
  return m;
}

nn::NamedTensors to_torchvision(const nn::Module& model) {
  static constexpr std::string_view kVar = ".running_var";
  nn::NamedTensors out;
  for (auto& [name, t] : model.state_dict()) {
    out.emplace_back(name, t);
    if (name.size() > kVar.size() && name.ends_with(kVar)) {
      out.emplace_back(name.substr(0, name.size() - kVar.size()) + ".num_batches_tracked",
                       Tensor::zeros({}, DType::i64));
    }
  }
  return out;
}

void load_torchvision(nn::Module& model, const nn::NamedTensors& state) {
  nn::NamedTensors kept;
  for (const auto& [name, t] : state) {
    if (!name.ends_with(".num_batches_tracked")) kept.emplace_back(name, t);
  }
  model.load_state_dict(kept, /*strict=*/true);
}

}  // namespace braid::models
