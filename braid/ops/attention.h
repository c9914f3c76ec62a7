// Fused scaled-dot-product attention: softmax(scale q k^T + mask) v with
// optional dropout on the weights, in one op whose forward and backward never
// hold a [Tq, Tk] score matrix (braid/tensor/cpu/attention.h: the
// flash-attention algorithm). f32 and f64, on the CPU and on CUDA devices
// (braid/cuda/attention_kernels.h: the same algorithm, a thread per row).
//
// Layout "BTHD" (as flash-attention): q [B, Tq, Hq, D], k and v [B, Tk, Hkv,
// D] -> [B, Tq, Hq, D] contiguous. Hq % Hkv == 0 (grouped-query attention:
// query head h reads key-value head h / (Hq / Hkv)). Inputs may be strided
// views (slices of a packed qkv projection viewed as [B, T, H, D]); they are
// read in place. Causal masking is aligned bottom-right: query i sees keys
// j <= i + (Tk - Tq), so Tq = Tk is training and Tq = 1 one decoding step with
// a key-value cache of Tk positions.
#pragma once

#include "braid/base/rng.h"
#include "braid/tensor/tensor.h"

namespace braid {

struct SdpaOptions {
  bool causal = true;
  double scale = 0;    // scores are scale * q . k; 0: 1 / sqrt(head dim)
  double dropout = 0;  // p on the attention weights, in [0, 1]; 0 in eval
  // Draws the dropout mask (advanced by 2048 words per 64 x 64 tile of each
  // (batch, head)'s Tq x Tk plane per call); null: this thread's
  // dropout_generator() (braid/ops/dropout.h).
  Generator* generator = nullptr;
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

}  // namespace braid
