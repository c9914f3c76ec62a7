// braid's matmul on the GPU against cuBLAS called directly, same operands,
// same output dtype: TFLOP/s of each and their ratio, median of several timed
// repetitions (CUDA events), alternating the two. The gap is braid's cost per
// call (allocation of the output, dispatch, its choice of cuBLAS call).
//
//   build/bin/gpu_gemm_bench [REPS]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "braid/base/median.h"
#include "braid/braid.h"
#include "braid/cuda/runtime.h"

namespace {

using namespace braid;

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Seconds per call of fn, timed with events on the current stream.
template <class F>
double seconds_per_call(F fn, int calls) {
  cudaStream_t s = cuda::current_stream(0);
  cuda::Event start = cuda::Event::record(s);
  for (int i = 0; i < calls; ++i) fn();
  cuda::Event end = cuda::Event::record(s);
  end.synchronize();
  return cuda::Event::elapsed(start, end) / calls;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  if (!available(Device::cuda(0))) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetStream(handle, cuda::current_stream(0));
  std::printf("%-6s %6s %12s %12s %8s\n", "dtype", "n", "braid_TF/s", "cublas_TF/s", "ratio");
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    for (int64_t n : {1024, 2048, 4096, 8192}) {
      Generator gen(1);
      Tensor a = Tensor::empty({n, n}), b = Tensor::empty({n, n});
      nn::init::uniform_(a, -1, 1, gen);
      nn::init::uniform_(b, -1, 1, gen);
      a = a.to(dtype).to(gpu);
      b = b.to(dtype).to(gpu);
      Tensor out = matmul(a, b);  // braid's output dtype rule, used by both sides
      const int calls = std::max<int>(3, static_cast<int>(2e12 / (2.0 * n * n * n)));
      const float one = 1, zero = 0;
      // Row-major C = A B is column-major C^T = B^T A^T.
      auto direct = [&] {
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.raw_data(), cuda_type(dtype), n, a.raw_data(),
                     cuda_type(dtype), n, &zero, out.raw_data(), cuda_type(out.dtype()), n, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      };
      auto ours = [&] { out = matmul(a, b); };
      direct();
      ours();
      std::vector<double> t_ours, t_direct;
      for (int r = 0; r < reps; ++r) {
        t_ours.push_back(seconds_per_call(ours, calls));
        t_direct.push_back(seconds_per_call(direct, calls));
      }
      const double flop = 2.0 * n * n * n;
      const double tf_ours = flop / upper_median(t_ours) / 1e12, tf_direct = flop / upper_median(t_direct) / 1e12;
      std::printf("%-6s %6lld %12.1f %12.1f %8.3f\n", std::string(name(dtype)).c_str(), static_cast<long long>(n),
                  tf_ours, tf_direct, tf_ours / tf_direct);
    }
  }
  cublasDestroy(handle);
  return 0;
}
