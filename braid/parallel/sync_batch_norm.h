// Synchronised batch norm: every BatchNorm2d of a data-parallel replica
// normalises with the statistics of the whole batch across the data axis (as
// one process over the concatenated batch would), not of its own slice. In
// forward each layer all-reduces its per-channel sums (count, sum of x, sum of
// squared deviations); backward all-reduces their gradients, which is what
// makes each replica's input gradient the whole batch's.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/ops/norm.h"

namespace braid::parallel {

// Sum over the ranks of `data` in forward and backward (differentiable; a
// TimeoutError names the rank and the direction).
Tensor allreduce_sum_both_ways(const Tensor& x, const comm::Communicator& data);

// Sets every BatchNorm2d in `model` (any depth) to synchronise over `data`;
// returns how many it found. ConfigError for a ghost-batch layer.
int synchronize_batch_norm(nn::Module& model, const comm::Communicator& data);

}  // namespace braid::parallel
