#include "braid/nn/norm.h"

#include <algorithm>
#include <vector>

#include "braid/ops/shape.h"

namespace braid::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, BatchNormLayerOptions options) : o_(options) {
  if (channels <= 0) fail<ValueError>("BatchNorm2d: channels must be > 0, got {}", channels);
  if (o_.ghost_batch < 0) fail<ValueError>("BatchNorm2d: ghost_batch must be >= 0, got {}", o_.ghost_batch);
  if (o_.affine) {
    weight_ = register_parameter("weight", Tensor::ones({channels}));
    bias_ = register_parameter("bias", Tensor::zeros({channels}));
  }
  running_mean_ = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var_ = register_buffer("running_var", Tensor::ones({channels}));
}

void BatchNorm2d::set_across_replicas(BatchSum across) {
  if (across && o_.ghost_batch > 0) {
    fail<ConfigError>("BatchNorm2d: ghost batches ({} examples) are local statistics; they cannot also be "
                      "synchronised across replicas", o_.ghost_batch);
  }
  across_ = std::move(across);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.ndim() != 4) fail<ValueError>("BatchNorm2d: expects [N, C, H, W], got {}", to_string(x.shape()));
  const BatchNormOptions options{.training = is_training(), .momentum = o_.momentum, .eps = o_.eps,
                                 .across_replicas = across_};
  const int64_t n = x.size(0), g = o_.ghost_batch;
  if (!is_training() || g <= 0 || n <= g) return batch_norm(x, running_mean_, running_var_, weight_, bias_, options);
  std::vector<Tensor> parts;
  for (int64_t b = 0; b < n; b += g) {
    parts.push_back(batch_norm(slice(x, 0, b, std::min(n, b + g)), running_mean_, running_var_, weight_, bias_, options));
  }
  return concat(parts, 0);
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
