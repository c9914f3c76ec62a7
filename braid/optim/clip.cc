#include "braid/optim/clip.h"

#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/reduce.h"

namespace braid::optim {

double grad_norm(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() != DType::f32 || !g.is_contiguous()) fail<ValueError>("grad_norm: gradients must be contiguous f32");
    grads.push_back(g);
  }
  return std::sqrt(sum_squares(grads));
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0)) fail<ValueError>("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const double norm = grad_norm(params);
  clip_grads_to(params, norm, max_norm);
  return norm;
}

void clip_grads_to(const std::vector<Tensor>& params, double norm, double max_norm) {
  if (!(max_norm > 0)) fail<ValueError>("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  if (!std::isfinite(norm)) return;
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1) return;
  const float c = static_cast<float>(coef);
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.device().is_cpu()) {
      g.copy_from(mul(g, coef));  // in place: a plan's bucket views of the gradient stay valid
      continue;
    }
    float* d = g.data<float>();
    parallel_for(0, g.numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) d[k] *= c;
    });
  }
}

}  // namespace braid::optim
