// Ring attention (Liu et al., 2023; the zig-zag split of Megatron-Core's and
// TorchTitan's context parallelism): softmax(scale q k^T + mask) v over a
// sequence whose tokens are spread over the ranks of a context-parallel group
// (layout.h), equal to the attention of the whole sequence.
//
// Forward: each rank keeps its queries; the key/value blocks travel around
// the ring (rank r sends to r + 1, receives from r - 1), C - 1 hops. At each
// step the next block's transfer is posted before the current block is
// attended to, so the hop overlaps the block's computation. Every visible
// (query chunk, key chunk) pair runs the fused kernel
// (braid/tensor/cpu/attention.h), and the partial results merge by their
// rows' log-sum-exp: lse = log(e^lse1 + e^lse2), out = e^(lse1 - lse) out1 +
// e^(lse2 - lse) out2 (the online softmax, one block at a time).
// Under the causal mask a pair is whole (key chunk before the query chunk),
// diagonal (the same chunk: causal within it) or skipped (after it).
//
// Backward: the blocks travel again; with the global out and lse the fused
// backward of a pair gives exactly that pair's share of dq, dk and dv. dk and
// dv accumulate in a buffer that follows its block one hop behind it and ends
// back at the block's owner after C hops.
//
// Cost per rank and layer: C - 1 sends of this rank's k and v (2 B Tl KV D
// elements each) forward; C - 1 of k and v and C of dk and dv backward.
#pragma once

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::context_parallel {

struct RingOptions {
  bool causal = true;
  double scale = 0;     // scores are scale * q . k; 0: 1 / sqrt(head dim)
  bool zigzag = true;   // the tokens' layout (layout.h): zig-zag, else contiguous
};

// q [B, Tl, H, D], k and v [B, Tl, KV, D] (KV divides H: grouped-query), f32
// or f64 on the CPU: this rank's tokens in the layout -> [B, Tl, H, D].
// Collective over `cp` (every rank calls it with the same shapes);
// differentiable in q, k and v (the backward is collective too).
Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const comm::Communicator& cp,
                      const RingOptions& options = {});

}  // namespace braid::parallel::context_parallel
