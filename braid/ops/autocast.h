// Mixed precision by region, as torch.autocast("cpu", dtype=torch.bfloat16).
//
//   {
//     braid::Autocast bf16(DType::bf16);
//     Tensor loss = cross_entropy(model.forward(x), y);
//     backward(loss);
//   }
//
// While an Autocast(bf16) is alive on a thread, that thread's linear, matmul
// and conv2d (and what is built on them: attention, the parallel layers)
// round their f32 inputs to bf16 and run bf16 products that accumulate and
// return f32; their backward does the same with the incoming gradient and
// the bf16 copies saved by the forward, whether or not the region is still
// open. Every other op (activations, norms, softmax, losses, reductions) runs
// in f32 as before, parameters stay f32 (the master weights), and gradients
// arrive in f32, so optimizers and gradient synchronisation need nothing.
// f64 inputs are left alone (as PyTorch does).
//
// One difference from PyTorch: the products return f32, not bf16, so the
// ops between them keep f32 activations (no second rounding per layer,
// no activation memory saved). docs/precision.md has the details.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

class Autocast {
 public:
  // `dtype`: bf16 turns mixed precision on, f32 turns it off (inside an
  // enclosing region too); anything else is a ValueError. Restores the
  // previous state on destruction.
  explicit Autocast(DType dtype = DType::bf16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DType previous_;
};

// The dtype the calling thread's products compute in: bf16 inside an
// Autocast(bf16), else f32.
DType autocast_dtype();

// True when a product over `t` should run in bf16: autocast is on and t is f32.
bool autocast_bf16(const Tensor& t);

}  // namespace braid
