#include "braid/nn/linear.h"

#include <cmath>

#include "braid/nn/init.h"
#include "braid/ops/linear.h"

namespace braid::nn {

Linear::Linear(int64_t in, int64_t out, Generator& gen, LinearOptions options) {
  if (in <= 0 || out <= 0) fail<ValueError>("Linear: sizes must be positive, got {} -> {}", in, out);
  const double bound = 1 / std::sqrt(static_cast<double>(in));
  weight_ = register_parameter("weight", Tensor::empty({out, in}));
  init::uniform_(weight_, -bound, bound, gen);
  if (options.bias) {
    bias_ = register_parameter("bias", Tensor::empty({out}));
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight_, bias_); }

Tensor Linear::forward_with(const Tensor& x, const Tensor& weight) const { return linear(x, weight, bias_); }

}  // namespace braid::nn
