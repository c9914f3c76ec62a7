// The differentiable collectives of tensor parallelism (Shoeybi et al. 2019,
// Megatron-LM): each is one collective on the tensor axis in forward and its
// conjugate in backward.
//
//   copy_to_tensor_parallel      identity      | all-reduce (sum) the gradient
//   reduce_from_tensor_parallel  all-reduce    | identity
//   gather_last_dim              all-gather    | keep this rank's slice
//
// A column-parallel layer starts with copy_to (its input is replicated, the
// gradient flowing back must sum every rank's part); a row-parallel layer ends
// with reduce_from (each rank holds a partial sum). Waits are bounded by the
// communicator's timeout; errors name the op.
#pragma once

#include <vector>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::tensor_parallel {

Tensor copy_to_tensor_parallel(const Tensor& x, const comm::Communicator& tp);
Tensor reduce_from_tensor_parallel(const Tensor& x, const comm::Communicator& tp);
// x [..., sizes[rank]] on each rank -> [..., sum(sizes)], rank r's slice at
// offset sizes[0] + ... + sizes[r - 1] (slices may differ in width).
Tensor gather_last_dim(const Tensor& x, const comm::Communicator& tp, const std::vector<int64_t>& sizes);

// The same all-reduce (sum, or max) without autograd, in place on a
// contiguous tensor.
void allreduce_inplace(const Tensor& t, const comm::Communicator& tp, comm::Op op, const char* what);

}  // namespace braid::parallel::tensor_parallel
