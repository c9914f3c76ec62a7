// Fused scaled-dot-product attention, raw CPU kernels (no autograd): the
// flash-attention algorithm (Dao et al., 2022; FlashAttention-2's loop order)
// with no [Tq, Tk] score matrix in memory.
//
// Layout "BTHD": q [B, Tq, Hq, D], k and v [B, Tk, Hkv, D], out [B, Tq, Hq, D]
// (fresh, contiguous). Hq % Hkv == 0: query head h reads key-value head
// h / (Hq / Hkv) (grouped-query attention). Inputs are read through their
// strides (any view: slices of a packed qkv projection are not copied).
// Causal masking is aligned bottom-right: query i sees keys j <= i + (Tk - Tq),
// so Tq = Tk is training and Tq = 1 one decoding step over a key-value cache;
// causal with Tq > Tk is refused (the first rows would see no key).
//
// Forward: for each (batch, head, block of query rows) the keys are visited
// block by block with an online softmax (running max and sum per row); key
// blocks wholly above the causal diagonal are skipped. It returns the output
// and each row's log-sum-exp of the scaled scores, lse [B, Hq, Tq] (f32 for
// f32 inputs, f64 for f64), which is all the backward needs to recompute the
// probabilities block by block:
//   P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
//   dQ += dS K * scale, dK += dS^T Q * scale,
// dK and dV summed over the query heads of a group. Work per (batch, head,
// query block) forward and per (batch, head) backward, spread over the
// intra-op pool; each output element is computed by one fixed sequence of
// operations, so results do not depend on the thread count. Scratch memory is
// O((Tq + Tk) * D) per thread, taken from the caching allocator.
//
// Dropout on the attention weights (after the softmax, whose normaliser sees
// the undropped weights, as in PyTorch): element (b, h, i, j) is kept with
// probability 1 - p (p in steps of 2^-16) and scaled by 1 / (1 - p). Its keep
// decision is 16 bits of the Philox stream at a counter that depends only on
// (b, h, i, j), so the backward regenerates the mask instead of storing it
// (AttentionParams; attention_dropout_mask gives it as a tensor).
#pragma once

#include <cstdint>

#include "braid/tensor/tensor.h"

namespace braid::cpu {

struct AttentionParams {
  bool causal = true;
  double scale = 1;    // the scores are scale * q . k
  double dropout = 0;  // p, in [0, 1]
  // Where the keep decisions come from (ignored when dropout == 0): word
  // first_word + w of the Philox stream (seed, stream), words as
  // Generator::next_u32 draws them. The (query, key) plane of each (b, h) is
  // cut into tiles of 64 x 64, numbered t = ((b * Hq + h) * ceil(Tq / 64) +
  // i / 64) * ceil(Tk / 64) + j / 64, and element e = (j % 64) * 64 + i % 64 of
  // tile t uses the 16 bits (e % 2) * 16 .. of word t * 2048 + e / 2: a tile's
  // draws are one run of words, drawn in vector lanes (philox_fill).
  uint64_t seed = 0, stream = 0, first_word = 0;
};

// Philox words a dropout call over these sizes reserves (2048 per tile, see
// AttentionParams); a generator moves past them.
uint64_t attention_dropout_words(int64_t batch, int64_t heads, int64_t tq, int64_t tk);

// Refuses, with a ValueError naming `op` and every shape, what the kernels
// cannot run: ranks other than 4, unequal batch, head dim or dtype, k and v of
// different shapes, Hq not a multiple of Hkv, an empty key axis or head dim,
// causal with Tq > Tk, and dtypes other than f32 and f64.
void check_attention(const Shape& q, const Shape& k, const Shape& v, DType q_dtype, DType k_dtype, DType v_dtype,
                     bool causal, const char* op);

struct AttentionForward {
  Tensor out;  // [B, Tq, Hq, D], q's dtype
  Tensor lse;  // [B, Hq, Tq]: log sum_j exp(scale q_i . k_j) over the keys row i sees
};
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p);

struct AttentionGrads {
  Tensor dq, dk, dv;  // q's, k's and v's shapes, contiguous
};
// dout, out: [B, Tq, Hq, D]; lse from attention_forward with the same params.
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& p);

// The dropout factor the kernels apply, as a tensor [B, Hq, Tq, Tk] of q's
// dtype: 1 / (1 - p) where kept, 0 where dropped (0 everywhere for p = 1).
// For tests: the composed attention with this mask must equal the kernel's.
Tensor attention_dropout_mask(int64_t batch, int64_t heads, int64_t tq, int64_t tk, DType dtype,
                              const AttentionParams& p);

}  // namespace braid::cpu
