// Inside the CUDA backend: what its kernel files share — the entry point each
// op family installs its kernels through, and the glue between tensors and
// the kernels of loop.h.
#pragma once

#include <vector>

#include "braid/cuda/loop.h"
#include "braid/ops/registry.h"
#include "braid/tensor/tensor.h"

namespace braid::cuda {

// Each family's file adds the CUDA kernels of its ops.
void install_tensor_kernels(const op::KernelAdder& add);
void install_elementwise_kernels(const op::KernelAdder& add);  // and the activation family
void install_matmul_kernels(const op::KernelAdder& add);  // and the linear family
void install_conv_kernels(const op::KernelAdder& add);    // and the pool family
void install_reduce_kernels(const op::KernelAdder& add);  // and sum_to
void install_softmax_kernels(const op::KernelAdder& add);
void install_loss_kernels(const op::KernelAdder& add);
void install_index_kernels(const op::KernelAdder& add);  // but embedding_bag
void install_embedding_bag_kernels(const op::KernelAdder& add);  // and its two gradients
void install_dropout_kernels(const op::KernelAdder& add);
void install_update_kernels(const op::KernelAdder& add);  // the optimizer updates
void install_norm_kernels(const op::KernelAdder& add);
void install_attention_kernels(const op::KernelAdder& add);  // fused attention, f32 and f64

// The gradient codecs' device kernels (codec_ops.cc), for comm::codec.
void install_codec_kernels();

// Every family above, in one call (the backend's registrar uses it).
void install_kernels(const op::KernelAdder& add);
// Makes this backend the cuda device and adds every family's kernels
// (backend.cc): at start-up where CUDA is built, on request in emulation
// (emulated::install).
void install_backend();

// A CUDA kernel entry for these dtypes of the op's dtype input (empty: any).
inline op::KernelEntry cuda_kernel(std::vector<DType> dtypes, op::Kernel fn) {
  return op::KernelEntry{Device::cuda(0), std::move(dtypes), std::move(fn)};
}

inline const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};
inline const std::vector<DType> kNumbers = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
inline const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                        DType::i32, DType::i64, DType::u8, DType::b8};

// A fresh tensor on `like`'s device.
inline Tensor empty_on(const Tensor& like, const Shape& shape, DType dtype) {
  return Tensor::empty(shape, dtype, like.device());
}

// Typed pointer to t's first element (device memory).
template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// The op's own inference on a call's inputs: its checks (so errors read as the
// CPU kernel's) and its output metas.
std::vector<op::TensorMeta> infer(const char* name, const op::Args& a);

// t's device memory, or null for an absent optional input.
inline void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// Strides of t broadcast to `shape` (0 where t has size 1 or lacks the dim).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

}  // namespace braid::cuda
