#include "braid/parallel/hooks.h"

#include "braid/autograd/engine.h"

namespace braid::parallel {

void connect_grad_hooks(Strategy& strategy, const std::vector<NamedParameter>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    autograd::on_grad_ready(params[i].tensor, [&strategy, i](Tensor& grad) { strategy.on_grad_ready(i, grad); });
  }
}

}  // namespace braid::parallel
