// Matrix products: matmul (2-D and batched 3-D with broadcast batch).
//
// Shapes: [m, k] x [k, n] -> [m, n]; [b, m, k] x [b, k, n] -> [b, m, n], where
// either side may be 2-D or have batch 1 and is then broadcast over the batch.
// Views whose last two dims are row-major or transposed (any row stride) go to
// BLAS without a copy; other layouts are copied once. f32 and f64; inside an
// Autocast(bf16) region f32 inputs run bf16 products into f32 (autocast.h).
#pragma once

#include <type_traits>

#include "braid/tensor/cpu/gemm.h"
#include "braid/tensor/tensor.h"

namespace braid {

Tensor matmul(const Tensor& a, const Tensor& b);

namespace detail {

// The type a product over T operands accumulates in and returns: bf16
// products return f32.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, bf16>, float, T>;

// A (batch of) matrix as BLAS sees it: element [i, j] of op(X) for batch item
// t is at p[t * batch_stride + (trans ? j * ld + i : i * ld + j)].
template <class T>
struct MatOperand {
  const T* p = nullptr;
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;  // 0: one matrix broadcast over the batch
  Tensor keep;               // owns the copy when the input had to be made contiguous
};

// The last two dims of t (2-D or 3-D) as an operand; copies only when no BLAS
// layout fits. `transpose` yields op(X) = X^T of t's matrices.
template <class T>
MatOperand<T> mat_operand(const Tensor& t, bool transpose = false);

// C[t] = op(A[t]) op(B[t]) for t < batch, C [m, n] row-major with row stride
// ldc and batch stride c_batch (0: all products summed into one C). beta
// applies to C's previous contents once. Folds the batch into one GEMM when
// the layout allows (broadcast B, or a sum over the batch).
template <class T>
void batched_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const MatOperand<T>& a,
                  const MatOperand<T>& b, Acc<T> beta, Acc<T>* c, int64_t ldc, int64_t c_batch);

// ValueError naming `op` unless t is f32 or f64.
void check_float(const char* op, const Tensor& t);

}  // namespace detail
}  // namespace braid
