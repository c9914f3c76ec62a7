// blas.h over cuBLAS: a row-major product C = op(A) op(B) is the column-major
// product C^T = op(B)^T op(A)^T, so the call swaps the factors (and m, n) and
// keeps each factor's transpose flag: a row-major [r, c] matrix with row
// stride ld is the column-major [c, r] matrix with leading dimension ld.
#include "braid/cuda/blas.h"

#include <cublas_v2.h>

#include <unordered_map>

#include "braid/base/error.h"
#include "braid/cuda/runtime.h"
#include "braid/tensor/tensor.h"

namespace braid::cuda::blas {

namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail<Error>("cuBLAS error in {}: {}", what, cublasGetStatusString(s));
}

// One handle per device and thread: a handle is not safe to share between
// threads that set different streams on it.
class Handles {
 public:
  ~Handles() {
    for (auto& [device, h] : handles_) cublasDestroy(h);  // at thread exit: errors have no one to go to
  }
  cublasHandle_t get(int device) {
    auto it = handles_.find(device);
    if (it != handles_.end()) return it->second;
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    handles_.emplace(device, h);
    return h;
  }

 private:
  std::unordered_map<int, cublasHandle_t> handles_;
};

// What cuBLAS asks for: 32 MiB of workspace on Hopper and later, 4 MiB before.
size_t workspace_bytes(int device) {
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  return major >= 9 ? (size_t{32} << 20) : (size_t{4} << 20);
}

// A workspace block from the caching allocator for one call, given back once
// the call is queued: reuse is ordered on the current stream (memory.h), so the
// block is not handed out again while this GEMM may still use it (one block
// per handle would race as soon as the thread switched streams).
Tensor workspace(size_t bytes, int device) {
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, Device::cuda(device));
}

cudaDataType cuda_type(DType d) {
  switch (d) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: fail<ValueError>("cuBLAS GEMM: no {} products", name(d));
  }
}

// C is written as memory rows of n elements (ldc apart) per batch item.
void zero_c(const Gemm& g, cudaStream_t stream) {
  const size_t item = itemsize(g.c);
  for (int64_t t = 0; t < g.batch; ++t) {
    void* c = static_cast<char*>(g.c_data) + t * g.c_batch_stride * static_cast<int64_t>(item);
    check(cudaMemset2DAsync(c, g.ldc * item, 0, g.n * item, g.m, stream), "cudaMemset2DAsync");
  }
}

}  // namespace

void gemm(const Gemm& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const bool ok = g.ab == g.c || ((g.ab == DType::f16 || g.ab == DType::bf16) && g.c == DType::f32);
  if (!ok) fail<ValueError>("cuBLAS GEMM: {} operands cannot write a {} result", name(g.ab), name(g.c));
  cudaStream_t stream = current_stream(g.device);
  if (g.k == 0) {
    if (g.beta == 0) zero_c(g, stream);
    else if (g.beta != 1) fail<ValueError>("cuBLAS GEMM: an empty sum (k = 0) takes beta 0 or 1, got {}", g.beta);
    return;
  }
  thread_local Handles handles;
  cublasHandle_t h = handles.get(g.device);
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  // cublasSetStream resets the workspace, so it is set after it, every call.
  thread_local std::unordered_map<int, size_t> sizes;
  auto size = sizes.find(g.device);
  if (size == sizes.end()) size = sizes.emplace(g.device, workspace_bytes(g.device)).first;
  const Tensor ws = workspace(size->second, g.device);
  check_cublas(cublasSetWorkspace(h, ws.raw_data(), size->second), "cublasSetWorkspace");
  // f16/bf16: keep split-K partial sums in f32 too, not only the dot products.
  const bool half = g.ab == DType::f16 || g.ab == DType::bf16;
  check_cublas(cublasSetMathMode(h, half ? CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");

  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (g.ab == DType::f64) compute = CUBLAS_COMPUTE_64F;
  if (g.ab == DType::f32 && g.tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  // alpha and beta in the compute type.
  const double alpha64 = g.alpha, beta64 = g.beta;
  const float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  const void* alpha = g.ab == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = g.ab == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;

  const cudaDataType ab = cuda_type(g.ab);
  check_cublas(cublasGemmStridedBatchedEx_64(h, g.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                             g.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, g.n, g.m, g.k, alpha, g.b.data, ab,
                                             g.b.ld, g.b.batch_stride, g.a.data, ab, g.a.ld, g.a.batch_stride, beta,
                                             g.c_data, cuda_type(g.c), g.ldc, g.c_batch_stride, g.batch, compute,
                                             CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace braid::cuda::blas
