// Dense matrix products through a BLAS library (never hand-written).
//
// Row-major C[m, n] = alpha * op(A) op(B) + beta * C with op(A) [m, k] and
// op(B) [k, n]; lda/ldb/ldc are row strides in elements of the stored
// (untransposed) matrices, as in cblas with CblasRowMajor.
//
// f32 runs on OpenBLAS (cblas_sgemm, with the kernels its runtime dispatch
// picks for the CPU: on a model Debian's 0.3.21 does not know, such as the
// 2-core Xeon of 2026-12 (family 6, model 207), that is its SSE3 "Prescott"
// set; OPENBLAS_VERBOSE=2 prints the choice and OPENBLAS_CORETYPE, read when
// the library loads, overrides it) or on oneDNN (dnnl_sgemm: the same jit gemm
// its f32 matmul primitive dispatches to in 2.6, "gemm:jit", picking AVX-512
// itself).
// Neither wins everywhere (measured on 784-256-256-10 MLP shapes: oneDNN faster
// for most, OpenBLAS for some A^T B products), and on shared cores a small
// product can run faster on one thread than on the whole pool, so `automatic`
// autotunes online per (m, n, k, transposes, threads) over {OpenBLAS, oneDNN}
// x {pool threads, one thread}: the first calls of a shape try each candidate
// on the real data, and the fastest minimum time wins from then on.
// f64 always uses OpenBLAS dgemm. Both libraries run on the one OpenMP pool.
//
// bf16 A and B with f32 C (mixed precision, docs/precision.md) run on
// oneDNN's matmul primitive, built once per shape and cached: it picks AMX or
// AVX512-BF16 kernels where the CPU has them and accumulates in f32. OpenBLAS
// declares cblas_sbgemm, but Debian's 0.3.21 build does not export it (built
// without bfloat16), so it is no candidate. (Measured on the development
// machine, a Xeon with AMX, one thread, MLP shapes m, n, k in {64, 256, 784}
// in a loop: 450-920 GFLOP/s against 120-170 for f32 through oneDNN; inside
// a training step 270-480.) `automatic` autotunes over {pool threads, one
// thread} as for f32.
#pragma once

#include <cstdint>
#include <string_view>

#include "braid/tensor/dtype.h"

namespace braid::cpu {

enum class GemmBackend : uint8_t { automatic, openblas, onednn };

std::string_view name(GemmBackend b);

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc, GemmBackend backend = GemmBackend::automatic);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc, GemmBackend backend = GemmBackend::automatic);
// bf16 products, f32 accumulation and C. Runs on oneDNN whatever the
// process-wide default names (openblas has no bf16 GEMM here).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
          int64_t lda, const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Makes every `automatic` f32 call use `b` (automatic = autotune again).
// For benchmarks and tests that pin a library; process-wide.
void set_default_gemm_backend(GemmBackend b);
GemmBackend default_gemm_backend();

// The library the autotuner has settled on for a shape at the current thread
// count, or automatic while it is still measuring.
GemmBackend gemm_choice(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

}  // namespace braid::cpu
