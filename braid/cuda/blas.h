// Matrix products on the GPU as the CUDA backend's ops see them: one
// (strided-batched) GEMM in row-major terms, with no cuBLAS types in sight.
// blas.cc implements it with cuBLAS; the emulated tests (tests/cuda/
// emulated_blas.cc) with reference loops that accumulate in double.
//
// Precision: f64 computes in f64; f32 in plain FP32 (no TF32 unless the call
// asks for it, so results match the CPU backend to FP32 rounding); f16 and
// bf16 operands accumulate in f32 (CUBLAS_COMPUTE_32F, reduced-precision
// split-K reductions disallowed) and write C in the operands' dtype or in f32.
#pragma once

#include <cstdint>

#include "braid/tensor/dtype.h"

namespace braid::cuda::blas {

// One factor: element [i, j] of op(X) for batch item t is at
// data[t * batch_stride + (trans ? j * ld + i : i * ld + j)] (in elements).
// batch_stride 0 broadcasts one matrix over the batch.
struct Operand {
  const void* data = nullptr;
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// C[t] = alpha op(A[t]) op(B[t]) + beta C[t] for t < batch; op(A) [m, k],
// op(B) [k, n], C [m, n] row-major with row stride ldc and batch stride
// c_batch_stride (> 0 when batch > 1: products are never summed into one C).
struct Gemm {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  DType ab = DType::f32;  // A and B: f32, f64, f16 or bf16
  DType c = DType::f32;   // C: ab, or f32 beside f16/bf16 operands
  Operand a, b;
  void* c_data = nullptr;
  int64_t ldc = 1;
  int64_t c_batch_stride = 0;
  double alpha = 1, beta = 0;  // beta 0: C is written, never read
  // f32 only: let cuBLAS round the factors to TF32 on tensor cores (~10-bit
  // mantissas; up to ~8x faster on A100/H100). Off by default: the op table
  // checks f32 results against the CPU backend at FP32 tolerances.
  bool tf32 = false;
  int device = 0;  // the GPU; the call goes to its current stream (runtime.h)
};

// Runs g. m, n or batch 0 do nothing; k == 0 (an empty sum) zeroes C for
// beta 0 and leaves it for beta 1 (other betas are refused there).
void gemm(const Gemm& g);

}  // namespace braid::cuda::blas
