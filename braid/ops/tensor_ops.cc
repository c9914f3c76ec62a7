#include "braid/ops/tensor_ops.h"

#include "braid/ops/define.h"
#include "braid/tensor/cpu/accumulate.h"

namespace braid {

namespace op {

void define_tensor_ops(const Definer& define) {
  define({.name = "cast", .family = "tensor", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{in[0].shape, static_cast<DType>(a.i("dtype"))}};
          },
          .kernels = every_device([](const Args& a) {
            Tensor out = Tensor::empty(a.inputs[0].shape(), static_cast<DType>(a.attrs.i("dtype")), a.inputs[0].device());
            out.copy_from(a.inputs[0]);
            return Outputs{out};
          }),
          .backward = [](const GradArgs& g) { return Grads{cast(g.grad, g.input_meta[0].dtype)}; }});
  define({.name = "clone", .family = "tensor", .inputs = 1, .infer = same_as(0),
          .kernels = every_device([](const Args& a) { return Outputs{a.inputs[0].clone()}; }),
          .backward = [](const GradArgs& g) { return Grads{g.grad}; },
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            return Cost{0, 2 * bytes_of(in[0]), 1};
          }});
  define({.name = "copy_", .family = "tensor", .inputs = 2, .effect = Effect::inplace, .mutates = {0},
          .infer = same_as(0),
          .kernels = every_device([](const Args& a) {
            a.inputs[0].copy_from(a.inputs[1]);
            return Outputs{a.inputs[0]};
          }),
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            return Cost{0, bytes_of(in[0]) + bytes_of(in[1]), 1};
          }});
  define({.name = "accumulate_", .family = "tensor", .inputs = 2, .effect = Effect::inplace, .mutates = {0},
          .infer = same_as(0),
          .kernels = {cpu_kernel(kArith, [](const Args& a) {
            cpu::add_into(a.inputs[0], a.inputs[1]);
            return Outputs{a.inputs[0]};
          })}});
}

}  // namespace op

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return op::call1(BRAID_OP("cast"), {x}, {{"dtype", static_cast<int64_t>(dtype)}});
}

Tensor clone(const Tensor& x) { return op::call1(BRAID_OP("clone"), {x}); }

void copy_(const Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape()) {
    fail<ValueError>("copy_: source shape {} does not match destination shape {}", to_string(src.shape()),
                     to_string(dst.shape()));
  }
  op::call(BRAID_OP("copy_"), {dst, src});
}

void accumulate_(const Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
    fail<ValueError>("accumulate_: {} {} += {} {}", name(dst.dtype()), to_string(dst.shape()), name(src.dtype()),
                     to_string(src.shape()));
  }
  op::call(BRAID_OP("accumulate_"), {dst, src});
}

}  // namespace braid
