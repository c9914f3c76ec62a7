#include "braid/ops/loss.h"

#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/index.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/tensor/cpu/reduce.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid {

// ---- the ops ----

namespace op {
namespace {

// Runs fn with float or double for an f32/f64 tensor (kernels declare which).
template <class Fn>
void float_or_double(const Tensor& x, const char* name, Fn&& fn) {
  if (x.dtype() == DType::f32) return fn(float{});
  if (x.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", name, braid::name(x.dtype()),
                   to_string(x.shape()));
}

// Input [N, C] and targets i64 [N].
void check_class_shapes(const char* name, const TensorMeta& x, const TensorMeta& targets) {
  if (x.shape.size() != 2 || targets.shape.size() != 1 || targets.shape[0] != x.shape[0]) {
    fail<ValueError>("{}: expected input [N, C] and targets [N], got {} and {}", name, to_string(x.shape),
                     to_string(targets.shape));
  }
  if (targets.dtype != DType::i64) {
    fail<ValueError>("{}: targets must be i64, got {} {}", name, braid::name(targets.dtype), to_string(targets.shape));
  }
}

// The targets, contiguous, once every value is checked to lie in [0, C).
Tensor checked_targets(const char* name, const Tensor& x, const Tensor& targets) {
  check_class_shapes(name, meta_of(x), meta_of(targets));
  Tensor t = targets.contiguous();
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] < 0 || p[i] >= x.size(1)) {
      fail<IndexError>("{}: target {} at position {} out of range for {} classes (input {})", name, p[i], i,
                       x.size(1), to_string(x.shape()));
    }
  }
  return t;
}

// -mean_i logp[i, t[i]] as a 0-d tensor of logp's dtype; logp contiguous.
Tensor mean_picked(const char* name, const Tensor& logp, const Tensor& t) {
  Tensor out = Tensor::empty({}, logp.dtype());
  float_or_double(logp, name, [&](auto zero) {
    using T = decltype(zero);
    const T* lp = logp.data<T>();
    const int64_t* tp = t.data<int64_t>();
    const int64_t n = logp.size(0), c = logp.size(1);
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc -= static_cast<double>(lp[i * c + tp[i]]);
    *out.data<T>() = static_cast<T>(acc / static_cast<double>(n));
  });
  return out;
}

// Two inputs of one shape and dtype.
void check_same(const char* name, const TensorMeta& a, const TensorMeta& b) {
  if (a.shape != b.shape || a.dtype != b.dtype) {
    fail<ValueError>("{}: logits {} {} and targets {} {} must match in shape and dtype", name, braid::name(a.dtype),
                     to_string(a.shape), braid::name(b.dtype), to_string(b.shape));
  }
}

// A per-element loss summed to one value: a few flops an element, one
// reduction over all of them.
Cost loss_cost(double flops_per_element, std::span<const TensorMeta> in, std::span<const TensorMeta> out) {
  double bytes = bytes_of(out[0]);
  for (const TensorMeta& t : in) bytes += bytes_of(t);
  const double n = static_cast<double>(numel(in[0].shape));
  return Cost{flops_per_element * n, bytes, log2_depth(n) + 1};
}

}  // namespace

void define_loss_ops(const Definer& define) {
  // Inputs logits [N, C], targets i64 [N]. Output 1 is log_softmax(logits),
  // kept for the backward: (softmax - onehot(targets)) / N from it in one pass.
  define({.name = "cross_entropy", .family = "loss", .inputs = 2, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_class_shapes("cross_entropy", in[0], in[1]);
            return Metas{{{}, in[0].dtype}, in[0]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor t = checked_targets("cross_entropy", a.inputs[0], a.inputs[1]);
            Tensor logp = cpu::softmax(a.inputs[0], 1, true, "cross_entropy");  // fresh, contiguous [N, C]
            return Outputs{mean_picked("cross_entropy", logp, t), logp};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{op::call1(BRAID_OP("cross_entropy_backward"), {g.grad, g.outputs[1], g.inputs[1]})};
          },
          .save_inputs = 0b10,
          .save_outputs = 0b10,
          // log_softmax's five flops an element, then the pick and mean.
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double c = in[0].shape.empty() ? 1.0 : static_cast<double>(in[0].shape.back());
            Cost cost = loss_cost(5, in, out);
            cost.bytes += bytes_of(out[1]);
            cost.depth = 2 * log2_depth(c) + log2_depth(static_cast<double>(in[0].shape[0])) + 3;
            return cost;
          }});
  // Inputs grad (0-d), log_softmax [N, C], targets [N]:
  // g_x = (exp(logp) - onehot(targets)) * grad / N.
  define({.name = "cross_entropy_backward", .family = "loss", .inputs = 3, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_class_shapes("cross_entropy_backward", in[1], in[2]);
            return Metas{in[1]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor t = checked_targets("cross_entropy_backward", a.inputs[1], a.inputs[2]);
            const Tensor logp = a.inputs[1].contiguous();
            Tensor gx = Tensor::empty(logp.shape(), logp.dtype());
            float_or_double(logp, "cross_entropy_backward", [&](auto zero) {
              using T = decltype(zero);
              const int64_t n = logp.size(0), c = logp.size(1);
              const T scale = static_cast<T>(a.inputs[0].item() / static_cast<double>(n));
              const T* lp = logp.data<T>();
              const int64_t* tp = t.data<int64_t>();
              T* gp = gx.data<T>();
              parallel_for(0, n, std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i) {
                  if constexpr (std::is_same_v<T, float>) {
                    cpu::exp_f32(lp + i * c, gp + i * c, c);
                    for (int64_t j = 0; j < c; ++j) gp[i * c + j] *= scale;
                  } else {
                    for (int64_t j = 0; j < c; ++j) gp[i * c + j] = std::exp(lp[i * c + j]) * scale;
                  }
                  gp[i * c + tp[i]] -= scale;
                }
              });
            });
            return Outputs{gx};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{3 * static_cast<double>(numel(out[0].shape)), bytes_of(in[1]) + bytes_of(in[2]) + bytes_of(out[0]), 2};
          }});

  // Inputs log_probs [N, C], targets i64 [N]: -mean_i log_probs[i, targets[i]].
  define({.name = "nll_loss", .family = "loss", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_class_shapes("nll_loss", in[0], in[1]);
            return Metas{{{}, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor t = checked_targets("nll_loss", a.inputs[0], a.inputs[1]);
            return Outputs{mean_picked("nll_loss", a.inputs[0].contiguous(), t)};
          })},
          // -grad / N at each target, zeros elsewhere: the scatter of gather.
          .backward = [](const GradArgs& g) {
            const Shape& shape = g.input_meta[0].shape;
            const int64_t n = shape[0];
            const Tensor per_row = expand(reshape(mul(g.grad, -1.0 / static_cast<double>(n)), {1, 1}), {n, 1});
            return Grads{gather_backward(per_row, 1, reshape(g.inputs[1], {n, 1}), shape)};
          },
          .save_inputs = 0b10,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double n = in[0].shape.empty() ? 0.0 : static_cast<double>(in[0].shape[0]);
            return Cost{n, n * static_cast<double>(itemsize(in[0].dtype)) + bytes_of(in[1]) + bytes_of(out[0]),
                        log2_depth(n)};
          }});

  // mean(max(x, 0) - x y + log(1 + exp(-|x|))) over logits x and targets y
  // of one shape, summed in double.
  define({.name = "bce_with_logits", .family = "loss", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_same("bce_with_logits", in[0], in[1]);
            return Metas{{{}, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            check_same("bce_with_logits", meta_of(a.inputs[0]), meta_of(a.inputs[1]));
            const Tensor x = a.inputs[0].contiguous(), y = a.inputs[1].contiguous();
            const int64_t n = x.numel();
            Tensor loss = Tensor::empty({}, x.dtype());
            float_or_double(x, "bce_with_logits", [&](auto zero) {
              using T = decltype(zero);
              const T* xp = x.data<T>();
              const T* yp = y.data<T>();
              double acc = 0;
              for (int64_t i = 0; i < n; ++i) {
                const double v = xp[i];
                acc += std::max(v, 0.0) - v * static_cast<double>(yp[i]) + std::log1p(std::exp(-std::abs(v)));
              }
              *loss.data<T>() = static_cast<T>(acc / static_cast<double>(n));
            });
            return Outputs{loss};
          })},
          // d/dx = (sigmoid(x) - y) / n in one pass of its own; d/dy = -x / n.
          .backward = [](const GradArgs& g) {
            const double n = static_cast<double>(numel(g.input_meta[0].shape));
            return Grads{g.needs(0) ? op::call1(BRAID_OP("bce_with_logits_backward"), {g.grad, g.inputs[0], g.inputs[1]})
                                    : Tensor(),
                         g.needs(1) ? mul(g.inputs[0], mul(g.grad, -1.0 / n)) : Tensor()};
          },
          .save_inputs = 0b11,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return loss_cost(8, in, out);
          }});
  // Inputs grad (0-d), logits, targets: (sigmoid(logits) - targets) * grad / n.
  define({.name = "bce_with_logits_backward", .family = "loss", .inputs = 3, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_same("bce_with_logits_backward", in[1], in[2]);
            return Metas{in[1]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            check_same("bce_with_logits_backward", meta_of(a.inputs[1]), meta_of(a.inputs[2]));
            const Tensor x = a.inputs[1].contiguous(), y = a.inputs[2].contiguous();
            Tensor gx = Tensor::empty(x.shape(), x.dtype());
            float_or_double(x, "bce_with_logits_backward", [&](auto zero) {
              using T = decltype(zero);
              const T* xp = x.data<T>();
              const T* yp = y.data<T>();
              T* gp = gx.data<T>();
              const T scale = static_cast<T>(a.inputs[0].item() / static_cast<double>(x.numel()));
              for (int64_t i = 0; i < x.numel(); ++i) gp[i] = (T{1} / (T{1} + std::exp(-xp[i])) - yp[i]) * scale;
            });
            return Outputs{gx};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{5 * static_cast<double>(numel(out[0].shape)), bytes_of(in[1]) + bytes_of(in[2]) + bytes_of(out[0]), 1};
          }});
}

}  // namespace op

// ---- the eager functions ----

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return op::call1(BRAID_OP("cross_entropy"), {logits, targets});
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets) {
  return op::call1(BRAID_OP("nll_loss"), {log_probs, targets});
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (input.shape() != target.shape()) {
    fail<ValueError>("mse_loss: input {} and target {} must have the same shape", to_string(input.shape()),
                     to_string(target.shape()));
  }
  // Composite of primitives (docs/design.md, "Composite ops are written in
  // primitives"): two passes over memory, nothing to fuse that matters.
  const Tensor d = sub(input, target);
  return mean(mul(d, d));
}

Tensor bce_with_logits(const Tensor& logits, const Tensor& targets) {
  return op::call1(BRAID_OP("bce_with_logits"), {logits, targets});
}

}  // namespace braid
