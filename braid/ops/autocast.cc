#include "braid/ops/autocast.h"

#include <vector>

#include "braid/base/error.h"
#include "braid/ops/registry.h"
#include "braid/ops/tensor_ops.h"
#include "braid/tensor/tensor.h"

namespace braid {
namespace {

// Per thread, like PyTorch's autocast state: ranks run as threads in tests.
thread_local DType t_dtype = DType::f32;

}  // namespace

Autocast::Autocast(DType dtype) : previous_(t_dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    fail<ValueError>("Autocast: products compute in f32, bf16 or f16, not {}", name(dtype));
  }
  t_dtype = dtype;
}

Autocast::~Autocast() { t_dtype = previous_; }

DType autocast_dtype() { return t_dtype; }

bool autocast_bf16(const Tensor& t) { return t_dtype == DType::bf16 && t.dtype() == DType::f32; }

bool autocast_f16(const char* op, const Tensor& t) {
  if (t_dtype != DType::f16 || t.dtype() != DType::f32) return false;
  if (t.device().is_cpu()) {
    fail<ValueError>("{}: f16 autocast needs a CUDA device: the CPU backend has no f16 products; use bf16", op);
  }
  return true;
}

Tensor autocast_f16_call(const op::OpDef& product, std::initializer_list<Tensor> inputs, const op::Attrs& attrs) {
  std::vector<Tensor> halves;
  halves.reserve(inputs.size());
  for (const Tensor& t : inputs) halves.push_back(t.defined() ? cast(t, DType::f16) : t);
  return cast(op::call1(product, halves, attrs), DType::f32);
}

}  // namespace braid
