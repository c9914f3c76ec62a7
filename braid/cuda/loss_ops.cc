// CUDA kernels of the loss family (braid/ops/loss.cc): the CPU kernels'
// shapes, dtypes and errors, plus f16 and bf16. Target indices are checked
// on the device (deferred_checks.h): an out-of-range target raises the CPU
// kernel's IndexError at the next sync, and the kernels skip it meanwhile;
// checking on the host cost a copy and a wait per call (two syncs a step).
#include "braid/base/error.h"
#include "braid/cuda/deferred_checks.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/loss_kernels.h"
#include "braid/cuda/softmax_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// Input [N, C] and targets i64 [N].
void check_class_shapes(const char* name, const Tensor& x, const Tensor& targets) {
  if (x.ndim() != 2 || targets.ndim() != 1 || targets.shape()[0] != x.shape()[0]) {
    fail<ValueError>("{}: expected input [N, C] and targets [N], got {} and {}", name, to_string(x.shape()),
                     to_string(targets.shape()));
  }
  if (targets.dtype() != DType::i64) {
    fail<ValueError>("{}: targets must be i64, got {} {}", name, braid::name(targets.dtype()),
                     to_string(targets.shape()));
  }
}

// The targets, contiguous on the device, with a check that every value lies
// in [0, C) queued behind them (raised at the next sync, in the CPU's words).
Tensor checked_targets(const char* name, const Tensor& x, const Tensor& targets) {
  check_class_shapes(name, x, targets);
  Tensor t = targets.contiguous();
  check_range_on_device(t, x.size(1), [name, classes = x.size(1), shape = to_string(x.shape())](int64_t i, int64_t v) {
    return fmt::format("{}: target {} at position {} out of range for {} classes (input {})", name, v, i, classes,
                       shape);
  });
  return t;
}

// Two inputs of one shape and dtype.
void check_same(const char* name, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    fail<ValueError>("{}: logits {} {} and targets {} {} must match in shape and dtype", name, braid::name(a.dtype()),
                     to_string(a.shape()), braid::name(b.dtype()), to_string(b.shape()));
  }
}

// The 0-d incoming gradient as one contiguous element of `dtype` (the CPU
// kernels read it with item(), which takes any dtype).
Tensor grad_scalar(const Tensor& g, DType dtype) {
  if (g.numel() != 1) fail<ValueError>("item: tensor of shape {} has {} elements, not 1", to_string(g.shape()), g.numel());
  return (g.dtype() == dtype ? g : g.to(dtype)).contiguous();
}

void* scratch_data(Tensor& scratch, const Tensor& like, int64_t n) {
  const size_t bytes = mean_scratch_bytes(n);
  if (bytes == 0) return nullptr;
  scratch = empty_on(like, {static_cast<int64_t>(bytes)}, DType::u8);  // freed in stream order
  return scratch.raw_data();
}

// -mean_i logp[i, t[i]] as a 0-d tensor of logp's dtype; logp contiguous.
Tensor mean_picked(const Tensor& logp, const Tensor& t) {
  Tensor out = empty_on(logp, {}, logp.dtype()), scratch;
  const int64_t n = logp.size(0);
  pick_mean(logp.dtype(), out.raw_data(), logp.raw_data(), static_cast<const int64_t*>(t.raw_data()), n, logp.size(1),
            scratch_data(scratch, logp, n));
  return out;
}

Outputs cross_entropy(const Args& a) {
  const Tensor& x = a.inputs[0];
  const Tensor t = checked_targets("cross_entropy", x, a.inputs[1]);
  const Tensor xc = x.contiguous();
  Tensor logp = empty_on(x, x.shape(), x.dtype());  // kept for the backward
  softmax(x.dtype(), logp.raw_data(), xc.raw_data(), x.size(0), x.size(1), 1, true);
  return Outputs{mean_picked(logp, t), logp};
}

Outputs cross_entropy_backward(const Args& a) {
  const Tensor t = checked_targets("cross_entropy_backward", a.inputs[1], a.inputs[2]);
  const Tensor logp = a.inputs[1].contiguous();
  const Tensor g = grad_scalar(a.inputs[0], logp.dtype());
  Tensor gx = empty_on(logp, logp.shape(), logp.dtype());
  cross_entropy_grad(logp.dtype(), gx.raw_data(), g.raw_data(), logp.raw_data(),
                     static_cast<const int64_t*>(t.raw_data()), logp.size(0), logp.size(1));
  return Outputs{gx};
}

Outputs bce_with_logits(const Args& a) {
  check_same("bce_with_logits", a.inputs[0], a.inputs[1]);
  const Tensor x = a.inputs[0].contiguous(), y = a.inputs[1].contiguous();
  Tensor loss = empty_on(x, {}, x.dtype()), scratch;
  bce_mean(x.dtype(), loss.raw_data(), x.raw_data(), y.raw_data(), x.numel(), scratch_data(scratch, x, x.numel()));
  return Outputs{loss};
}

Outputs bce_with_logits_backward(const Args& a) {
  check_same("bce_with_logits_backward", a.inputs[1], a.inputs[2]);
  const Tensor x = a.inputs[1].contiguous(), y = a.inputs[2].contiguous();
  const Tensor g = grad_scalar(a.inputs[0], x.dtype());
  Tensor gx = empty_on(x, x.shape(), x.dtype());
  bce_grad(x.dtype(), gx.raw_data(), g.raw_data(), x.raw_data(), y.raw_data(), x.numel());
  return Outputs{gx};
}

}  // namespace

void install_loss_kernels(const op::KernelAdder& add) {
  add("cross_entropy", cuda_kernel(kFloats, cross_entropy));
  add("cross_entropy_backward", cuda_kernel(kFloats, cross_entropy_backward));
  add("nll_loss", cuda_kernel(kFloats, [](const Args& a) {
        const Tensor t = checked_targets("nll_loss", a.inputs[0], a.inputs[1]);
        return Outputs{mean_picked(a.inputs[0].contiguous(), t)};
      }));
  add("bce_with_logits", cuda_kernel(kFloats, bce_with_logits));
  add("bce_with_logits_backward", cuda_kernel(kFloats, bce_with_logits_backward));
}

}  // namespace braid::cuda
