// Ulysses attention (Jacobs et al., 2023, DeepSpeed-Ulysses): the tokens of a
// sequence are spread contiguously over a context-parallel group (layout.h,
// contiguous); an all-to-all turns the sequence-sharded q, k and v into
// head-sharded ones (each rank: the whole sequence, H / C heads), each rank
// attends with the fused op on its heads, and a second all-to-all brings the
// output back to sequence shards. Both all-to-alls are differentiable (the
// backward of one is the other), so the attention's own backward is the
// fused op's.
//
// Cost per rank and layer: 3 all-to-alls of (C - 1) / C of this rank's q, k
// and v (forward; their gradients backward), and 1 of the output. Heads and
// key/value heads must divide by C.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::context_parallel {

// x [B, T / C, H, D] (this rank's tokens) -> [B, T, H / C, D] (every token,
// this rank's heads: r H / C ...). Differentiable; collective over `cp`.
Tensor sequence_to_heads(const Tensor& x, const comm::Communicator& cp);
// The inverse: [B, T, H / C, D] -> [B, T / C, H, D].
Tensor heads_to_sequence(const Tensor& x, const comm::Communicator& cp);

// q [B, T / C, H, D], k and v [B, T / C, KV, D] -> [B, T / C, H, D]: the
// attention of the whole sequence for this rank's tokens. ValueError when C
// does not divide H or KV.
Tensor ulysses_attention(const Tensor& q, const Tensor& k, const Tensor& v, const comm::Communicator& cp,
                         bool causal = true, double scale = 0);

}  // namespace braid::parallel::context_parallel
