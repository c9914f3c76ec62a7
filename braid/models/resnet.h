// ResNet (He et al., 2016) as torchvision.models.resnet18/34/50 builds it.
//
//   stem      conv1 (7x7/2, pad 3) bn1 relu maxpool (3x3/2, pad 1)   imagenet
//             conv1 (3x3/1, pad 1) bn1 relu                          small (28x28, 32x32)
//   layer1-4  blocks of 64, 128, 256, 512 channels; the first block of
//             layer2-4 halves the resolution (stride 2 in its 3x3 conv) and
//             projects its shortcut (downsample = 1x1/2 conv, bn)
//             18: 2 2 2 2 basic blocks      x -> relu(bn2(conv2(relu(bn1(conv1 x)))) + x)
//             34: 3 4 6 3 basic blocks
//             50: 3 4 6 3 bottlenecks       1x1 (c) -> 3x3 (c) -> 1x1 (4c), torchvision's
//                                           "v1.5" (the stride sits in the 3x3)
//   head      avgpool (mean over h, w) fc: [n, 512 * expansion] -> [n, classes]
//
// The model is an nn::Sequential of those children, under torchvision's
// names, so its state_dict names are torchvision's: conv1.weight,
// bn1.running_mean, layer1.0.conv1.weight, layer2.0.downsample.0.weight,
// layer2.0.downsample.1.bias, fc.weight, ... (a pipeline cuts it between
// stem parts, stages and head). Convolutions have no bias, as torchvision's.
// torchvision's batch norms also hold num_batches_tracked, a counter only
// read when momentum is None; braid's BatchNorm2d has no such buffer:
// to_torchvision adds it (0) and load_torchvision ignores it.
//
// Initialisation as torchvision: convolution weights ~ N(0, 2 / fan_out)
// (kaiming_normal_, mode fan_out, relu), batch norm weight 1 and bias 0, fc
// at the Linear default U(-1/sqrt(in), 1/sqrt(in)); zero_init_residual sets
// the last batch norm weight of each block to 0 so every block starts as
// the identity (Goyal et al., 2017).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "braid/base/rng.h"
#include "braid/nn/conv.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"

namespace braid::models {

enum class ResNetStem : uint8_t { imagenet, small };

// "imagenet" | "small"; ValueError naming the text otherwise.
ResNetStem parse_resnet_stem(std::string_view text);

struct ResNetConfig {
  int depth = 18;  // 18, 34 (basic blocks) or 50 (bottlenecks)
  int64_t classes = 1000;
  int64_t in_channels = 3;
  ResNetStem stem = ResNetStem::imagenet;
  bool zero_init_residual = false;
  // Every batch norm's options (ghost batches for model.norm = ghost_batch).
  nn::BatchNormLayerOptions norm{};

  // ValueError naming the field when a value is out of range (a depth other
  // than 18, 34 or 50; classes or channels < 1).
  void validate() const;
  // Blocks per stage and channels multiplier of the last conv of a block.
  std::array<int, 4> blocks() const;
  int64_t expansion() const { return depth >= 50 ? 4 : 1; }
};

// x -> relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); shortcut is
// downsample(x) when the block changes resolution or width, else x.
class BasicBlock final : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t planes, int64_t stride, const ResNetConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<nn::Sequential> downsample_;  // null: identity
};

// x -> relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + shortcut(x)),
// conv1 1x1 in -> planes, conv2 3x3/stride planes -> planes, conv3 1x1
// planes -> 4 planes.
class Bottleneck final : public nn::Module {
 public:
  Bottleneck(int64_t in, int64_t planes, int64_t stride, const ResNetConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<nn::Sequential> downsample_;
};

// [n, in_channels, h, w] -> [n, classes] logits. Weights drawn from gen in
// registration (state_dict) order. Any h, w from 1 up for the small stem;
// the imagenet stem needs h, w >= 1 too (torchvision's strides floor).
std::shared_ptr<nn::Sequential> resnet(const ResNetConfig& config, Generator& gen);

// The state_dict torchvision's resnet of the same config holds: braid's
// tensors (shared, not copied) plus "<bn>.num_batches_tracked" = 0 (i64, 0-d)
// after each batch norm's running_var.
nn::NamedTensors to_torchvision(const nn::Module& model);
// Loads a torchvision state_dict (strict: every other key must match by
// name and shape), skipping its num_batches_tracked counters.
void load_torchvision(nn::Module& model, const nn::NamedTensors& state);

}  // namespace braid::models
