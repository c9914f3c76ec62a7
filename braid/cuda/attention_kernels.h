// Device kernels of fused scaled-dot-product attention (braid/ops/attention.h):
// the CPU kernel's algorithm (braid/tensor/cpu/attention.h) with a thread per
// row, so no [Tq, Tk] score matrix exists on the device either.
//
// Forward: a thread per (batch, head, query row) visits the keys the row sees
// with an online softmax (running max and normaliser, the output rescaled when
// the max grows) and writes the row's output and log-sum-exp. Backward, two
// launches: a thread per query row computes delta = rowsum(dO * O) and dQ,
// recomputing each score as exp(scale q . k - lse); then a thread per
// (batch, key-value head, key row) recomputes the same probabilities for the
// queries that see its key, over the query heads of its group, and sums dK
// and dV. Every output element is written by one thread in one fixed order:
// no atomics, results that do not depend on the launch shape.
//
// Dropout keeps (b, h, i, j) on exactly the CPU kernel's Philox word
// (AttentionParams), so masks and values equal the CPU's. The forward writes
// the stream's (seed, stream, first word) into a device i64 [3] tensor, which
// the backward reads on the device: no host read of either.
//
// f32 and f64 (the CPU op's dtypes); head dim at most kMaxHeadDim (the row's
// accumulators live in the thread). Written for the emulated reference and as
// the portable fallback: one thread walks a whole row, which a GPU runs far
// below its peak.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

inline constexpr int64_t kMaxHeadDim = 256;

// A [B, T, H, D] operand read through its strides (elements).
struct AttentionOperand {
  const void* data;
  int64_t sb, st, sh, sd;
};

struct AttentionShape {
  int64_t b, tq, tk, hq, hkv, d;
  bool causal;
  double scale;    // scores are scale * q . k
  double dropout;  // p in [0, 1]
};

// The Philox stream of the dropout mask (ignored when dropout == 0).
struct AttentionRng {
  uint64_t seed, stream, first_word;
};

// out [B, Tq, Hq, D] and lse [B, Hq, Tq] contiguous of `dtype`; rng (i64 [3])
// receives `rng`'s words.
void attention_forward(DType dtype, const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                       const AttentionOperand& v, void* out, void* lse, int64_t* rng_out, const AttentionRng& rng);

// dq, dk, dv contiguous in q's, k's and v's shapes; dout, out contiguous
// [B, Tq, Hq, D]; lse as the forward wrote it; rng the forward's i64 [3] (a
// device pointer); delta scratch of B * Hq * Tq elements of `dtype`.
void attention_backward(DType dtype, const AttentionShape& s, const void* dout, const AttentionOperand& q,
                        const AttentionOperand& k, const AttentionOperand& v, const void* out, const void* lse,
                        const int64_t* rng, void* delta, void* dq, void* dk, void* dv);

}  // namespace braid::cuda
