#include "braid/ops/norm.h"

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"

namespace braid {

namespace {

void check_param(const char* op, const char* what, const Tensor& p, const Shape& expect, const Tensor& x) {
  if (p.defined() && (p.shape() != expect || p.dtype() != x.dtype())) {
    fail<ValueError>("{}: {} must be {} {}, got {} {} (input {})", op, what, name(x.dtype()), to_string(expect),
                     name(p.dtype()), to_string(p.shape()), to_string(x.shape()));
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape()[x.ndim() - k + i] == normalized_shape[i];
  if (!ok) {
    fail<ValueError>("layer_norm: normalized_shape {} is not the trailing shape of the input {}",
                     to_string(normalized_shape), to_string(x.shape()));
  }
  check_param("layer_norm", "weight", weight, normalized_shape, x);
  check_param("layer_norm", "bias", bias, normalized_shape, x);
  std::vector<int64_t> dims;
  for (int64_t i = x.ndim() - k; i < x.ndim(); ++i) dims.push_back(i);
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor variance = mean(mul(centered, centered), dims, true);
  Tensor y = div(centered, sqrt(add(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, BatchNormOptions options) {
  if (x.ndim() < 2) fail<ValueError>("batch_norm: input must be [N, C, ...], got {}", to_string(x.shape()));
  const int64_t c = x.size(1);
  check_param("batch_norm", "weight", weight, {c}, x);
  check_param("batch_norm", "bias", bias, {c}, x);
  check_param("batch_norm", "running_mean", running_mean, {c}, x);
  check_param("batch_norm", "running_var", running_var, {c}, x);
  // [C] -> [1, C, 1, ...] so per-channel tensors broadcast against x.
  Shape channel(x.ndim(), 1);
  channel[1] = c;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) if (d != 1) dims.push_back(d);

  Tensor mu, variance;
  if (options.training) {
    const int64_t n = x.numel() / std::max<int64_t>(c, 1);
    if (n <= 1) fail<ValueError>("batch_norm: training needs more than one value per channel, input {}", to_string(x.shape()));
    mu = mean(x, dims, true);
    const Tensor centered = sub(x, mu);
    variance = mean(mul(centered, centered), dims, true);
    if (running_mean.defined() || running_var.defined()) {
      autograd::NoGradGuard no_grad;
      const double m = options.momentum;
      if (running_mean.defined()) running_mean.copy_from(add(mul(running_mean, 1 - m), mul(reshape(mu, {c}), m)));
      if (running_var.defined()) {
        const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        running_var.copy_from(add(mul(running_var, 1 - m), mul(reshape(variance, {c}), m * unbias)));
      }
    }
  } else {
    if (!running_mean.defined() || !running_var.defined()) {
      fail<ValueError>("batch_norm: eval mode needs running_mean and running_var (input {})", to_string(x.shape()));
    }
    mu = reshape(running_mean, channel);
    variance = reshape(running_var, channel);
  }
  Tensor y = div(sub(x, mu), sqrt(add(variance, options.eps)));
  if (weight.defined()) y = mul(y, reshape(weight, channel));
  if (bias.defined()) y = add(y, reshape(bias, channel));
  return y;
}

}  // namespace braid
