#include "braid/nn/norm.h"

#include "braid/ops/norm.h"

namespace braid::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, BatchNormLayerOptions options) : o_(options) {
  if (channels <= 0) fail<ValueError>("BatchNorm2d: channels must be > 0, got {}", channels);
  if (o_.affine) {
    weight_ = register_parameter("weight", Tensor::ones({channels}));
    bias_ = register_parameter("bias", Tensor::zeros({channels}));
  }
  running_mean_ = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var_ = register_buffer("running_var", Tensor::ones({channels}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.ndim() != 4) fail<ValueError>("BatchNorm2d: expects [N, C, H, W], got {}", to_string(x.shape()));
  return batch_norm(x, running_mean_, running_var_, weight_, bias_,
                    {.training = is_training(), .momentum = o_.momentum, .eps = o_.eps});
}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : shape_(std::move(shape)), eps_(eps) {
  if (shape_.empty() || numel(shape_) <= 0) fail<ValueError>("LayerNorm: bad shape {}", to_string(shape_));
  if (affine) {
    weight_ = register_parameter("weight", Tensor::ones(shape_));
    bias_ = register_parameter("bias", Tensor::zeros(shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, shape_, weight_, bias_, eps_); }

}  // namespace braid::nn
