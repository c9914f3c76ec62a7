// dnn.h over cuDNN's convolution API (cudnnConvolutionForward and its two
// backward products, still in cuDNN 9's cnn library). Per geometry, dtype,
// pass and device the algorithm is chosen once from cuDNN's heuristics
// (cudnnGet*Algorithm_v7, no timing runs: Find would allocate and time every
// algorithm on the first call of each shape) and cached for the process.
#include "braid/cuda/dnn.h"

#include <cudnn.h>

#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "braid/base/error.h"
#include "braid/cuda/runtime.h"
#include "braid/tensor/tensor.h"

namespace braid::cuda::dnn {

namespace {

void check_cudnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) fail<Error>("cuDNN error in {}: {}", what, cudnnGetErrorString(s));
}

// One handle per device and thread, pointed at the current stream per call.
cudnnHandle_t handle(int device) {
  struct Handles {
    std::unordered_map<int, cudnnHandle_t> map;
    ~Handles() {
      for (auto& [d, h] : map) cudnnDestroy(h);  // at thread exit: errors have no one to go to
    }
  };
  thread_local Handles handles;
  auto it = handles.map.find(device);
  if (it == handles.map.end()) {
    cudnnHandle_t h = nullptr;
    check_cudnn(cudnnCreate(&h), "cudnnCreate");
    it = handles.map.emplace(device, h).first;
  }
  check_cudnn(cudnnSetStream(it->second, current_stream(device)), "cudnnSetStream");
  return it->second;
}

int as_int(int64_t v) {
  if (v > INT_MAX) fail<ValueError>("cuDNN convolution: dimension {} does not fit cuDNN's int sizes", v);
  return static_cast<int>(v);
}

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    default: fail<ValueError>("cuDNN convolution: no {} kernels (bf16 is widened to f32 by the op)", name(d));
  }
}

// The descriptors of one call: x, w, y and the convolution.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors(const Conv2dGeometry& g, DType dtype) {
    check_cudnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    try {
      set(g, dtype);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Descriptors() { destroy(); }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  void set(const Conv2dGeometry& g, DType dtype) {
    const cudnnDataType_t t = data_type(dtype);
    check_cudnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, t, as_int(g.n), as_int(g.c), as_int(g.h), as_int(g.w)),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t, as_int(g.n), as_int(g.o), as_int(g.oh()),
                                           as_int(g.ow())),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NCHW, as_int(g.o), as_int(g.c / g.groups), as_int(g.kh),
                                           as_int(g.kw)),
                "cudnnSetFilter4dDescriptor");
    // f16 accumulates in f32; f32 and f64 in themselves.
    const cudnnDataType_t compute = dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    check_cudnn(cudnnSetConvolution2dDescriptor(conv, as_int(g.pad_h), as_int(g.pad_w), as_int(g.stride_h),
                                                as_int(g.stride_w), as_int(g.dil_h), as_int(g.dil_w),
                                                CUDNN_CROSS_CORRELATION, compute),
                "cudnnSetConvolution2dDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(conv, as_int(g.groups)), "cudnnSetConvolutionGroupCount");
    check_cudnn(cudnnSetConvolutionMathType(conv, requested_math(dtype)), "cudnnSetConvolutionMathType");
  }
  void destroy() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }

  // f32 asks for FMA kernels only: cuDNN's default math lets Ampere and later
  // round f32 factors to TF32, which the CPU comparisons would not pass.
  static cudnnMathType_t requested_math(DType dtype) {
    if (dtype == DType::f32) return CUDNN_FMA_MATH;
    return dtype == DType::f16 ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
  }
};

enum class Pass : int64_t { forward, backward_data, backward_filter };

struct Choice {
  int algo;
  cudnnMathType_t math;
};

// Algorithms needing more workspace than this are passed over (bytes).
constexpr size_t kMaxWorkspace = size_t{1} << 30;

// The first algorithm of cuDNN's ranking (fastest first) that fits: a
// deterministic one when there is one (gradients then repeat bit for bit run
// to run), never a tensor-op one for f32.
template <class Perf>
Choice pick(const Perf* perf, int count, DType dtype, const Conv2dGeometry& g, const char* pass) {
  for (bool deterministic : {true, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      if (dtype == DType::f32 && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
      if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
      return {static_cast<int>(p.algo), dtype == DType::f32 ? CUDNN_FMA_MATH : p.mathType};
    }
  }
  fail<Error>("cuDNN offers no {} algorithm for the convolution {} ({})", pass, g.to_string(), name(dtype));
}

// The cached choice for (pass, dtype, device, geometry), found by `query` on a miss.
template <class Query>
Choice choose(Pass pass, DType dtype, int device, const Conv2dGeometry& g, Query&& query) {
  using Key = std::array<int64_t, 17>;
  static std::mutex mutex;
  static std::map<Key, Choice> cache;
  const Key key{static_cast<int64_t>(pass), static_cast<int64_t>(dtype), device, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw,
                g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const Choice c = query();
  std::lock_guard lock(mutex);
  cache.emplace(key, c);
  return c;
}

// Workspace from the caching allocator for one call, given back once the call
// is queued: reuse is ordered on the current stream (memory.h).
Tensor workspace(size_t bytes, int device) {
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, Device::cuda(device));
}

// alpha = 1, beta = 0 in the scaling type cuDNN wants (double for f64).
struct Scale {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* beta(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d[1]) : &f[1]; }
};

}  // namespace

void conv2d_forward(const Conv2dGeometry& g, DType dtype, const void* x, const void* w, void* y, int device) {
  const Descriptors d(g, dtype);
  cudnnHandle_t h = handle(device);
  const Choice c = choose(Pass::forward, dtype, device, g, [&] {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, static_cast<int>(perf.size()), &count,
                                                       perf.data()),
                "cudnnGetConvolutionForwardAlgorithm_v7");
    return pick(perf.data(), count, dtype, g, "forward");
  });
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(c.algo);
  check_cudnn(cudnnSetConvolutionMathType(d.conv, c.math), "cudnnSetConvolutionMathType");
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, &bytes),
              "cudnnGetConvolutionForwardWorkspaceSize");
  const Tensor ws = workspace(bytes, device);
  const Scale s;
  check_cudnn(cudnnConvolutionForward(h, s.alpha(dtype), d.x, x, d.w, w, d.conv, algo, bytes ? ws.raw_data() : nullptr,
                                      bytes, s.beta(dtype), d.y, y),
              "cudnnConvolutionForward");
}

void conv2d_backward_data(const Conv2dGeometry& g, DType dtype, const void* dy, const void* w, void* dx, int device) {
  const Descriptors d(g, dtype);
  cudnnHandle_t h = handle(device);
  const Choice c = choose(Pass::backward_data, dtype, device, g, [&] {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, static_cast<int>(perf.size()),
                                                            &count, perf.data()),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    return pick(perf.data(), count, dtype, g, "backward-data");
  });
  const auto algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo);
  check_cudnn(cudnnSetConvolutionMathType(d.conv, c.math), "cudnnSetConvolutionMathType");
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, &bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize");
  const Tensor ws = workspace(bytes, device);
  const Scale s;
  check_cudnn(cudnnConvolutionBackwardData(h, s.alpha(dtype), d.w, w, d.y, dy, d.conv, algo,
                                           bytes ? ws.raw_data() : nullptr, bytes, s.beta(dtype), d.x, dx),
              "cudnnConvolutionBackwardData");
}

void conv2d_backward_filter(const Conv2dGeometry& g, DType dtype, const void* dy, const void* x, void* dw,
                            int device) {
  const Descriptors d(g, dtype);
  cudnnHandle_t h = handle(device);
  const Choice c = choose(Pass::backward_filter, dtype, device, g, [&] {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, static_cast<int>(perf.size()),
                                                              &count, perf.data()),
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    return pick(perf.data(), count, dtype, g, "backward-filter");
  });
  const auto algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo);
  check_cudnn(cudnnSetConvolutionMathType(d.conv, c.math), "cudnnSetConvolutionMathType");
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, &bytes),
              "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  const Tensor ws = workspace(bytes, device);
  const Scale s;
  check_cudnn(cudnnConvolutionBackwardFilter(h, s.alpha(dtype), d.x, x, d.y, dy, d.conv, algo,
                                             bytes ? ws.raw_data() : nullptr, bytes, s.beta(dtype), d.w, dw),
              "cudnnConvolutionBackwardFilter");
}

}  // namespace braid::cuda::dnn
