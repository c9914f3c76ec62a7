// Mixed precision by region, as torch.autocast(dtype=torch.bfloat16) and,
// on a GPU, torch.autocast("cuda", dtype=torch.float16).
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
// Autocast(f16) rounds the products' f32 inputs (bias included, as PyTorch
// does) to f16 and runs f16 products, whose f16 results are widened back to
// f32, so the ops between products see f32 as under bf16. Their backward
// runs in f16 too: gradients below f16's range (2^-24) flush to zero, which
// is what loss scaling (braid/optim/loss_scaler.h) is for. Only a CUDA
// device has f16 products: a product over CPU tensors under Autocast(f16)
// throws ValueError saying so; meta tensors (tracing) are accepted.
//
// One difference from PyTorch: the products return f32, not bf16/f16, so the
// ops between them keep f32 activations (no activation memory saved).
// docs/precision.md has the details.
#pragma once

#include <initializer_list>

#include "braid/tensor/tensor.h"

namespace braid {

namespace op {
struct OpDef;
class Attrs;
}  // namespace op

class Autocast {
 public:
  // `dtype`: bf16 or f16 turns mixed precision on, f32 turns it off (inside
  // an enclosing region too); anything else is a ValueError. Restores the
  // previous state on destruction.
  explicit Autocast(DType dtype = DType::bf16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DType previous_;
};

// The dtype the calling thread's products compute in: bf16 or f16 inside an
// Autocast of that dtype, else f32.
DType autocast_dtype();

// True when a product over `t` should run in bf16: autocast is on and t is f32.
bool autocast_bf16(const Tensor& t);

// True when a product over `t` should run in f16: Autocast(f16) is on and t
// is f32. On a CPU tensor it throws ValueError naming `op` instead: the CPU
// backend has no f16 products, and failing here beats a dtype error from
// the kernel lookup that does not mention autocast.
bool autocast_f16(const char* op, const Tensor& t);

// `product` over f16 copies of its defined inputs, its result widened to f32
// (the `cast` op both ways, so the backward runs in f16 and returns f32).
Tensor autocast_f16_call(const op::OpDef& product, std::initializer_list<Tensor> inputs, const op::Attrs& attrs);

}  // namespace braid
