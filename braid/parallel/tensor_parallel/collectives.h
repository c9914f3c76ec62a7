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

// Sequence parallelism (Korthikanti et al. 2022): activations [B, T, ...]
// whose sequence (dim 1) is cut into t equal segments, tensor rank r holding
// tokens [r T/t, (r + 1) T/t). Each is the other's conjugate:
//
//   gather_sequence          all-gather along dim 1      | reduce-scatter the gradient
//   reduce_scatter_sequence  reduce-scatter along dim 1  | all-gather the gradient
//
// ValueError when T does not divide by the degree.
Tensor gather_sequence(const Tensor& x, const comm::Communicator& tp);
Tensor reduce_scatter_sequence(const Tensor& x, const comm::Communicator& tp);

// The raw pieces (no autograd), for the products that overlap them
// (overlap.h). Rows [b, e) of every rank's segment of `full` [B, T, ...]
// (segments of T / t), stacked: [t, B, e - b, ...], contiguous; and back.
Tensor segment_rows(const Tensor& full, int t, int64_t b, int64_t e);
void place_segment_rows(const Tensor& full, const Tensor& parts, int64_t b, int64_t e);
// all-gather: in [n] on every rank -> out [t, n]; reduce-scatter (sum): in
// [t, n] -> out [n] = sum over ranks of block `rank`. Both contiguous and
// alive until the Work completes.
comm::Work start_allgather(const Tensor& in, const Tensor& out, const comm::Communicator& tp);
comm::Work start_reduce_scatter(const Tensor& in, const Tensor& out, const comm::Communicator& tp);
comm::Work start_allreduce(const Tensor& t, const comm::Communicator& tp);
// Waits for a collective started above; a timeout names the op and the tensor rank.
void finish(const comm::Work& w, const comm::Communicator& tp, const char* what);

}  // namespace braid::parallel::tensor_parallel
