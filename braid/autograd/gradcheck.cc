#include "braid/autograd/gradcheck.h"

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/rng.h"

namespace braid::autograd {

namespace {
double weighted_sum(const Tensor& out, const std::vector<double>& weights) {
  std::vector<double> v = out.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * weights[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  for (const Tensor& t : inputs) {
    if (t.requires_grad() && t.dtype() != DType::f64) {
      fail<ValueError>("gradcheck: inputs that require grad must be f64, got {}", name(t.dtype()));
    }
  }
  Tensor out = fn(inputs);
  Generator gen(options.seed, 7);
  std::vector<double> weights(static_cast<size_t>(out.numel()));
  for (double& w : weights) w = gen.uniform_f64() * 2 - 1;

  for (const Tensor& t : inputs) {
    if (t.requires_grad()) t.set_grad(Tensor());
  }
  if (!out.requires_grad()) fail<ValueError>("gradcheck: the output does not depend on any input requiring grad");
  backward(out, Tensor::from_vector(weights, out.shape()).to(out.dtype()).to(out.device()));

  GradcheckResult result;
  int reported = 0;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& in = inputs[k];
    if (!in.requires_grad()) continue;
    std::vector<double> analytic =
        in.grad().defined() ? in.grad().to_vector<double>() : std::vector<double>(static_cast<size_t>(in.numel()), 0.0);
    // Perturb through a contiguous index -> (possibly strided) element map.
    const Shape strides = in.strides();
    for (int64_t j = 0; j < in.numel(); ++j) {
      int64_t rem = j, off = in.offset();
      for (int64_t d = in.ndim() - 1; d >= 0; --d) {
        off += (rem % in.shape()[d]) * strides[d];
        rem /= in.shape()[d];
      }
      // The element as a 0-dim view: read and written through the tensor, so
      // inputs on any device are perturbed in place.
      const Tensor element = in.as_strided({}, {}, off);
      const double saved = element.item();
      element.fill(saved + options.eps);
      const double plus = weighted_sum(fn(inputs), weights);
      element.fill(saved - options.eps);
      const double minus = weighted_sum(fn(inputs), weights);
      element.fill(saved);
      const double numeric = (plus - minus) / (2 * options.eps);
      const double err = std::abs(numeric - analytic[j]);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (err > options.atol + options.rtol * std::abs(numeric)) {
        result.ok = false;
        if (reported++ < 5) {
          result.report += fmt::format("input {} element {}: analytic {:.8g} numeric {:.8g}\n", k, j, analytic[j],
                                       numeric);
        }
      }
    }
  }
  return result;
}

}  // namespace braid::autograd
