#include "braid/ops/softmax.h"

#include "braid/ops/define.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace op {
namespace {

InferFn along_dim(const char* op_name) {
  return [op_name](std::span<const TensorMeta> in, const Attrs& a) {
    wrap_dim(a.i("dim"), static_cast<int64_t>(in[0].shape.size()), op_name);
    return Metas{in[0]};
  };
}

// The length of the rows along dim.
double row_length(const Shape& s, const Attrs& a) {
  return s.empty() ? 1.0 : static_cast<double>(s[wrap_dim(a.i("dim"), static_cast<int64_t>(s.size()), "softmax")]);
}

// Max, subtract, exp, sum, scale: about five flops an element, with two
// reductions along dim (max, then the sum) one after the other.
Cost softmax_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
  return Cost{5 * static_cast<double>(numel(in[0].shape)), bytes_of(in[0]) + bytes_of(out[0]),
              2 * log2_depth(row_length(in[0].shape, a)) + 2};
}

void define_softmax(const Definer& define, const char* op_name, const char* backward_name, bool log) {
  define({.name = op_name, .family = "softmax", .inputs = 1, .infer = along_dim(op_name),
          .kernels = {cpu_kernel(kFloat, [op_name, log](const Args& a) {
            return Outputs{cpu::softmax(a.inputs[0], a.attrs.i("dim"), log, op_name)};
          })},
          // Both backwards need only the output.
          .backward = [backward_name](const GradArgs& g) {
            return Grads{op::call1(op::find(backward_name), {g.grad, g.outputs[0]}, g.attrs)};
          },
          .save_outputs = 0b1,
          .cost = softmax_cost});
  // Inputs grad, y (the forward's output); one fused pass over rows:
  //   softmax:     g_x = y * (g - sum(g * y))
  //   log_softmax: g_x = g - exp(y) * sum(g)
  define({.name = backward_name, .family = "softmax", .inputs = 2,
          .infer = [backward_name](std::span<const TensorMeta> in, const Attrs& a) {
            if (in[0] != in[1]) {
              fail<ValueError>("{}: gradient {} {} and output {} {} differ", backward_name, name(in[0].dtype),
                               to_string(in[0].shape), name(in[1].dtype), to_string(in[1].shape));
            }
            return along_dim(backward_name)(in, a);
          },
          .kernels = {cpu_kernel(kFloat, [log](const Args& a) {
            return Outputs{cpu::softmax_backward(a.inputs[0], a.inputs[1], a.attrs.i("dim"), log)};
          })},
          // About three flops an element and one reduction along dim.
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return Cost{3 * static_cast<double>(numel(in[0].shape)), bytes_of(in[0]) + bytes_of(in[1]) + bytes_of(out[0]),
                        log2_depth(row_length(in[0].shape, a)) + 2};
          }});
}

}  // namespace

void define_softmax_ops(const Definer& define) {
  define_softmax(define, "softmax", "softmax_backward", false);
  define_softmax(define, "log_softmax", "log_softmax_backward", true);
}

}  // namespace op

Tensor softmax(const Tensor& x, int64_t dim) { return op::call1(BRAID_OP("softmax"), {x}, {{"dim", dim}}); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return op::call1(BRAID_OP("log_softmax"), {x}, {{"dim", dim}}); }

}  // namespace braid
