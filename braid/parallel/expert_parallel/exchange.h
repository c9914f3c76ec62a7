// Expert parallelism's token exchange (docs/moe.md): the X ranks of an expert
// group each hold E / X of an MoE layer's experts; a layer's rows go to the
// ranks holding their experts and come back in their original order.
//
//   dispatch  the per-expert counts first (an alltoall of E counts), then the
//             rows themselves (alltoallv), then a permutation from (source
//             rank, local expert) order to local-expert order for the grouped
//             GEMM
//   combine   the inverse permutation, then alltoallv back
//
// Both are differentiable: the backward of an alltoallv is the alltoallv of
// the gradients the other way, so backward runs the same exchanges in reverse
// order on every rank of the group. Cost per MoE layer and direction: one
// alltoall of E int64 and one alltoallv of the routed rows' bytes ((X-1)
// alpha each on the pairwise algorithm).
#pragma once

#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/moe.h"

namespace braid::parallel::expert_parallel {

class CommExchange final : public nn::ExpertExchange {
 public:
  // group: this rank's expert group (X ranks); experts: E, which X divides.
  CommExchange(comm::Communicator group, int64_t experts);
  nn::ExpertBatch dispatch(const Tensor& rows, const std::vector<int64_t>& counts) override;
  Tensor combine(const Tensor& rows, const nn::ExpertBatch& batch) override;

 private:
  comm::Communicator group_;
  int64_t experts_, local_;
};

// x [sum(send_rows), D] -> [sum(recv_rows), D]: block j of x's rows goes to
// group rank j, block i of the result comes from rank i (exchange the counts
// first). Differentiable; collective over `group`.
// Waits for an expert-parallel collective on `c` (twice its timeout); a
// timeout says which collective and this rank's place.
void wait_for(comm::Work w, const comm::Communicator& c, const char* what);

Tensor alltoallv_rows(const Tensor& x, const comm::Communicator& group, const std::vector<int64_t>& send_rows,
                      const std::vector<int64_t>& recv_rows);

}  // namespace braid::parallel::expert_parallel
