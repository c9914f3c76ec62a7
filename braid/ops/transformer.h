// The pieces of a modern decoder block that are not generic ops, each a fused
// row kernel with its backward (f32/f64, CPU): RMSNorm (LLaMA's norm), rotary
// position embeddings (RoPE) and the SwiGLU gate. The composites of primitives
// they replace are their tests' reference (tests/ops/transformer_ops_test.cc).
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// x * rsqrt(mean(x^2 over the last dim) + eps) * weight (Zhang & Sennrich,
// 2019). weight [d] or undefined; x [..., d].
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), double eps = 1e-6);

// Rotary position embedding (Su et al., 2021) of x [B, T, H, D] (D even; any
// strides): position p = offset + t rotates the pair (x[i], x[i + D/2]) by the
// angle p * theta^(-2i/D), i < D/2: the "rotate half" layout of GPT-NeoX and
// the Hugging Face LLaMA. Returns a contiguous [B, T, H, D].
Tensor rotary_embedding(const Tensor& x, int64_t offset = 0, double theta = 10000);

// h [..., 2F] holding (gate, up) side by side -> silu(gate) * up [..., F]
// (Shazeer, 2020): the gated MLP of LLaMA, one GEMM for both projections.
Tensor swiglu(const Tensor& h);

}  // namespace braid
