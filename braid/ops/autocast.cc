#include "braid/ops/autocast.h"

#include "braid/base/error.h"
#include "braid/tensor/tensor.h"

namespace braid {
namespace {

// Per thread, like PyTorch's autocast state: ranks run as threads in tests.
thread_local DType t_dtype = DType::f32;

}  // namespace

Autocast::Autocast(DType dtype) : previous_(t_dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16) {
    fail<ValueError>("Autocast: the CPU computes products in f32 or bf16, not {}", name(dtype));
  }
  t_dtype = dtype;
}

Autocast::~Autocast() { t_dtype = previous_; }

DType autocast_dtype() { return t_dtype; }

bool autocast_bf16(const Tensor& t) { return t_dtype == DType::bf16 && t.dtype() == DType::f32; }

}  // namespace braid
