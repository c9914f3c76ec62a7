// Inside the ops layer: the small vocabulary op definitions are written in —
// kernel entries, common inference rules and dtype sets — so each family file
// reads as a table of ops.
#pragma once

#include <vector>

#include "braid/ops/families.h"
#include "braid/ops/registry.h"

namespace braid::op {

inline const std::vector<DType> kFloat = {DType::f32, DType::f64};
inline const std::vector<DType> kArith = {DType::f32, DType::f64, DType::i32, DType::i64};
inline const std::vector<DType> kCompare = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::b8};

using Outputs = std::vector<Tensor>;
using Grads = std::vector<Tensor>;
using Metas = std::vector<TensorMeta>;

// A CPU kernel for these input dtypes (empty: any).
inline KernelEntry cpu_kernel(std::vector<DType> dtypes, Kernel fn) {
  return KernelEntry{Device::cpu, std::move(dtypes), std::move(fn)};
}
// A kernel made only of allocations on its inputs' device and Tensor copies,
// which every device's backend provides: the same function serves each device.
inline std::vector<KernelEntry> every_device(Kernel fn) {
  return {KernelEntry{Device::cpu, {}, fn}, KernelEntry{Device::cuda(0), {}, std::move(fn)}};
}
// The same function on the meta device: for views, whose kernels only
// compute strides and so run on tensors without memory.
inline KernelEntry meta_kernel(Kernel fn) { return KernelEntry{Device::meta, {}, std::move(fn)}; }

// Output 0 has input i's shape and dtype (or `dtype` when given).
inline InferFn same_as(int i) {
  return [i](std::span<const TensorMeta> in, const Attrs&) { return Metas{in[i]}; };
}
inline InferFn same_shape_as(int i, DType dtype) {
  return [i, dtype](std::span<const TensorMeta> in, const Attrs&) { return Metas{{in[i].shape, dtype}}; };
}

// The broadcast of inputs 0 and 1 (NumPy rules), with input 0's dtype or `dtype`.
Shape broadcast_of(std::span<const TensorMeta> in, const char* op);
InferFn broadcast_infer(const char* op);
InferFn broadcast_infer(const char* op, DType dtype);

// Bytes of a tensor of this shape and dtype.
inline double bytes_of(const TensorMeta& m) {
  return m.absent ? 0.0 : static_cast<double>(numel(m.shape) * static_cast<int64_t>(itemsize(m.dtype)));
}
// ceil(log2 n): the depth of a balanced sum of n terms.
double log2_depth(double n);

}  // namespace braid::op

// The op named `name`, looked up once per call site (eager functions use it).
#define BRAID_OP(name) \
  ([]() -> const ::braid::op::OpDef& { static const ::braid::op::OpDef& d = ::braid::op::find(name); return d; }())
