// The C++ side of the comparisons with PyTorch (zero_vs_torch.py,
// local_sgd_vs_torch.py): tensors from the safetensors file the Python side
// writes (safetensors_np.py), and f32 results written back for it to read.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/safetensors.h"
#include "braid/tensor/tensor.h"

namespace braid::testing {

inline Tensor to_tensor(const safetensors::TensorData& d) {
  const DType dtype = d.dtype == "F32" ? DType::f32 : d.dtype == "I64" ? DType::i64 : throw ValueError("dtype " + d.dtype);
  Tensor t = Tensor::empty(Shape(d.shape.begin(), d.shape.end()), dtype);
  std::memcpy(t.raw_data(), d.data.data(), d.data.size());
  return t;
}

// `tensors` must be contiguous f32.
inline void write_f32(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, safetensors::TensorRef> refs;
  for (const auto& [name, t] : tensors) {
    refs[name] = {"F32", std::vector<int64_t>(t.shape().begin(), t.shape().end()),
                  {static_cast<const std::byte*>(t.raw_data()), t.nbytes()}};
  }
  safetensors::write(path, refs);
}

}  // namespace braid::testing
