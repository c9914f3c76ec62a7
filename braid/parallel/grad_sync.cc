#include "braid/parallel/grad_sync.h"

#include "braid/autograd/engine.h"

namespace braid::parallel {

void connect_grad_hooks(GradSync& sync, const std::vector<NamedParameter>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    autograd::on_grad_ready(params[i].tensor, [&sync, i](Tensor& grad) { sync.on_grad_ready(i, grad); });
  }
}

}  // namespace braid::parallel
