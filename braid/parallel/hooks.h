// Wires autograd's grad-ready hooks of the parameters to a Strategy.
#pragma once

#include "braid/parallel/strategy.h"

namespace braid::parallel {

// Calls strategy.on_grad_ready(i, grad) whenever params[i]'s gradient is final.
// The strategy must outlive the parameters' hooks (the trainer owns both).
void connect_grad_hooks(Strategy& strategy, const std::vector<NamedParameter>& params);

}  // namespace braid::parallel
