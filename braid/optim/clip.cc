#include "braid/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/update.h"
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
  // Contiguous f32 gradients of each device, scaled by one op (a launch per
  // 32 tensors instead of a product and a copy each).
  std::vector<std::pair<Device, std::vector<Tensor>>> on_device;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.device().is_cpu()) {
      if (g.dtype() != DType::f32 || !g.is_contiguous()) {
        g.copy_from(mul(g, coef));  // in place: a plan's bucket views of the gradient stay valid
        continue;
      }
      auto it = std::find_if(on_device.begin(), on_device.end(), [&](const auto& d) { return d.first == g.device(); });
      if (it == on_device.end()) it = on_device.insert(on_device.end(), {g.device(), {}});
      it->second.push_back(g);
      continue;
    }
    float* d = g.data<float>();
    parallel_for(0, g.numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) d[k] *= c;
    });
  }
  for (const auto& [device, grads] : on_device) scale_multi_(grads, coef);  // in place, as float(coef)
}

}  // namespace braid::optim
