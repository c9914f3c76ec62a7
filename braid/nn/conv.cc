#include "braid/nn/conv.h"

#include <cmath>

#include "braid/nn/init.h"

namespace braid::nn {

Conv2d::Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen, Conv2dLayerOptions o)
    : conv_{.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups} {
  if (in <= 0 || out <= 0 || kernel[0] <= 0 || kernel[1] <= 0 || o.groups <= 0 || in % o.groups || out % o.groups) {
    fail<ValueError>("Conv2d: bad sizes in={} out={} kernel={}x{} groups={}", in, out, kernel[0], kernel[1], o.groups);
  }
  weight_ = register_parameter("weight", Tensor::empty({out, in / o.groups, kernel[0], kernel[1]}));
  const double bound = 1 / std::sqrt(static_cast<double>(init::fans(weight_.shape()).first));
  init::uniform_(weight_, -bound, bound, gen);
  if (o.bias) {
    bias_ = register_parameter("bias", Tensor::empty({out}));
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight_, bias_, conv_); }

Tensor Conv2d::forward_with(const Tensor& x, const Tensor& weight) const { return conv2d(x, weight, bias_, conv_); }

}  // namespace braid::nn
