// Optimizer updates as ops: one fused in-place pass over a parameter, its
// gradient and its state buffers (braid/optim calls these from step()). Being
// ops, they appear in a captured training step like everything else.
//
// `scalars` is a small f64 tensor of the values that change from step to step
// — [lr] for SGD, [lr, step] for Adam — so that a captured step, bound to the
// optimizer's own scalars tensor, stays right as the schedule moves; the
// hyper-parameters that do not change are attributes. f32 parameters only.
#pragma once

#include <span>

#include "braid/tensor/tensor.h"

namespace braid {

struct SgdUpdate {
  double weight_decay = 0;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  bool first = false;  // the momentum buffer starts as the gradient
};

// d = g + wd * p; with momentum: b = first ? d : momentum * b + (1 - dampening) * d,
// d = nesterov ? d + momentum * b : b; then p -= lr * d. `buffer` is undefined
// without momentum.
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& buffer, const Tensor& scalars,
                 const SgdUpdate& options);

struct AdamUpdate {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * wd instead of g += wd * p
};

// Adam with bias correction for step t = scalars[1] (1 on the first step).
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& scalars, const AdamUpdate& options);

// adam_update_ over many parameters in one op (one set of hyper-parameters):
// the same arithmetic on each, so bit-equal to a call per parameter, in a few
// launches on a device instead of two per parameter (braid/cuda: the step's
// constants once, then a launch per 32 tensors of one dtype mix). The spans
// are equally long. Op inputs: scalars, then (param, grad, exp_avg,
// exp_avg_sq) per parameter; output 0 is the first parameter, and every
// parameter and state buffer is written.
void adam_update_multi_(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs, const Tensor& scalars,
                        const AdamUpdate& options);

// sum_i sum_k x_i[k]^2 over f32 contiguous tensors of one device, as an f64
// 0-dim tensor there (gradient clipping's norm: one op where a product, a sum
// and an add per tensor took three launches each on a GPU). Each tensor is
// summed in blocks of 1024 elements, a block's squares in float in order, the
// blocks' sums in double in order, so the CPU and the device give the same
// bits.
Tensor sum_squares_multi(std::span<const Tensor> tensors);

// x *= float(factor) in place over contiguous f32 tensors of one device
// (gradient clipping's scale: one op where a product and a copy per tensor
// took two launches each on a GPU). Output 0 is the first tensor; every
// tensor is written.
void scale_multi_(std::span<const Tensor> tensors, double factor);

}  // namespace braid
