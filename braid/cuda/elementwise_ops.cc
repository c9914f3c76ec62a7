// CUDA kernels of the elementwise and activation families (braid/ops/
// elementwise.cc, activation.cc): the same attributes and dtype rules as the
// CPU kernels, plus f16 and bf16.
#include "braid/base/error.h"
#include "braid/cuda/elementwise_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/ops/activation_attrs.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

void check_same_dtype(const Tensor& a, const Tensor& b, const char* name) {
  if (a.dtype() != b.dtype()) {
    fail<ValueError>("{}: dtype mismatch, {} {} and {} {}", name, braid::name(a.dtype()), to_string(a.shape()),
                     braid::name(b.dtype()), to_string(b.shape()));
  }
}

Tensor map_unary(UnaryOp op, const Tensor& x, double alpha = 0, double beta = 0) {
  Tensor out = empty_on(x, x.shape(), x.dtype());
  const Shape* strides[2] = {&out.strides(), &x.strides()};
  unary(op, x.dtype(), out.raw_data(), x.raw_data(), make_indexer<2>(x.shape(), strides), x.numel(), alpha, beta);
  return out;
}

Tensor map_binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const bool comparison = op >= BinaryOp::eq && op <= BinaryOp::ge;
  Tensor out = empty_on(a, shape, comparison ? DType::b8 : a.dtype());
  const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  const Shape* strides[3] = {&out.strides(), &sa, &sb};
  binary(op, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), make_indexer<3>(shape, strides), numel(shape));
  return out;
}

op::Kernel unary_kernel(UnaryOp op) {
  return [op](const Args& a) {
    return Outputs{map_unary(op, a.inputs[0], a.attrs.has("alpha") ? a.attrs.f("alpha") : 0.0)};
  };
}

op::Kernel binary_kernel(BinaryOp op, const char* name) {
  return [op, name](const Args& a) { return Outputs{map_binary(op, a.inputs[0], a.inputs[1], name)}; };
}


Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, const char* name) {
  if (cond.dtype() != DType::b8) fail<ValueError>("{}: condition must be bool, got {}", name, braid::name(cond.dtype()));
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), name), b.shape(), name);
  Tensor out = empty_on(a, shape, a.dtype());
  const Shape sc = broadcast_strides(cond, shape), sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  const Shape* strides[4] = {&out.strides(), &sc, &sa, &sb};
  where(a.dtype(), out.raw_data(), cond.raw_data(), a.raw_data(), b.raw_data(), make_indexer<4>(shape, strides),
        numel(shape));
  return out;
}

}  // namespace

void install_elementwise_kernels(const op::KernelAdder& add) {
  const std::pair<const char*, BinaryOp> arithmetic[] = {
      {"add", BinaryOp::add}, {"sub", BinaryOp::sub}, {"mul", BinaryOp::mul},
      {"maximum", BinaryOp::maximum}, {"minimum", BinaryOp::minimum}};
  for (const auto& [name, op] : arithmetic) add(name, cuda_kernel(kNumbers, binary_kernel(op, name)));
  add("div", cuda_kernel(kFloats, binary_kernel(BinaryOp::div, "div")));
  const std::pair<const char*, BinaryOp> comparisons[] = {{"eq", BinaryOp::eq}, {"ne", BinaryOp::ne},
                                                          {"lt", BinaryOp::lt}, {"le", BinaryOp::le},
                                                          {"gt", BinaryOp::gt}, {"ge", BinaryOp::ge}};
  for (const auto& [name, op] : comparisons) add(name, cuda_kernel(kAll, binary_kernel(op, name)));

  const std::pair<const char*, UnaryOp> any_number[] = {{"add_scalar", UnaryOp::add}, {"mul_scalar", UnaryOp::mul},
                                                        {"rsub_scalar", UnaryOp::rsub}, {"neg", UnaryOp::neg},
                                                        {"abs", UnaryOp::abs}, {"sign", UnaryOp::sign},
                                                        {"relu", UnaryOp::relu}};
  for (const auto& [name, op] : any_number) add(name, cuda_kernel(kNumbers, unary_kernel(op)));
  const std::pair<const char*, UnaryOp> floating[] = {{"rdiv_scalar", UnaryOp::rdiv}, {"pow", UnaryOp::pow},
                                                      {"exp", UnaryOp::exp}, {"log", UnaryOp::log},
                                                      {"sqrt", UnaryOp::sqrt}, {"tanh", UnaryOp::tanh},
                                                      {"sigmoid", UnaryOp::sigmoid}};
  for (const auto& [name, op] : floating) add(name, cuda_kernel(kFloats, unary_kernel(op)));

  // Activations and their fused backward ops over (g, saved).
  add("gelu", cuda_kernel(kFloats, [](const Args& a) {
        return Outputs{map_unary(op::gelu_is_tanh(a.attrs) ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, a.inputs[0])};
      }));
  add("gelu_backward", cuda_kernel(kFloats, [](const Args& a) {
        const BinaryOp kind = op::gelu_is_tanh(a.attrs) ? BinaryOp::gelu_tanh_grad : BinaryOp::gelu_erf_grad;
        return Outputs{map_binary(kind, a.inputs[0], a.inputs[1], "gelu_backward")};
      }));
  add("relu_backward", cuda_kernel(kFloats, binary_kernel(BinaryOp::relu_grad, "relu_backward")));
  add("tanh_backward", cuda_kernel(kFloats, binary_kernel(BinaryOp::tanh_grad, "tanh_backward")));
  add("sigmoid_backward", cuda_kernel(kFloats, binary_kernel(BinaryOp::sigmoid_grad, "sigmoid_backward")));
  add("clamp", cuda_kernel(kNumbers, [](const Args& a) {
        return Outputs{map_unary(UnaryOp::clamp, a.inputs[0], op::clamp_lower(a.attrs), op::clamp_upper(a.attrs))};
      }));
  add("clamp_backward", cuda_kernel(kFloats, [](const Args& a) {
        const Tensor& g = a.inputs[0];
        const Tensor& x = a.inputs[1];
        check_same_dtype(g, x, "clamp_backward");
        const Shape shape = broadcast_shapes(g.shape(), x.shape(), "clamp_backward");
        Tensor out = empty_on(x, shape, x.dtype());
        const Shape sg = broadcast_strides(g, shape), sx = broadcast_strides(x, shape);
        const Shape* strides[3] = {&out.strides(), &sg, &sx};
        clamp_grad(x.dtype(), out.raw_data(), g.raw_data(), x.raw_data(), make_indexer<3>(shape, strides),
                   numel(shape), op::clamp_lower(a.attrs), op::clamp_upper(a.attrs));
        return Outputs{out};
      }));
  add("where", cuda_kernel({}, [](const Args& a) { return Outputs{select(a.inputs[0], a.inputs[1], a.inputs[2], "where")}; }));
  add("masked_fill", cuda_kernel({}, [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const Tensor& mask = a.inputs[1];
        if (mask.dtype() != DType::b8) fail<ValueError>("masked_fill: mask must be bool, got {}", name(mask.dtype()));
        if (broadcast_shapes(x.shape(), mask.shape(), "masked_fill") != x.shape()) {
          fail<ValueError>("masked_fill: mask {} does not broadcast to the input {}", to_string(mask.shape()),
                           to_string(x.shape()));
        }
        Tensor out = empty_on(x, x.shape(), x.dtype());
        const Shape sm = broadcast_strides(mask, x.shape());
        const Shape* strides[3] = {&out.strides(), &x.strides(), &sm};
        masked_fill(x.dtype(), out.raw_data(), x.raw_data(), mask.raw_data(), make_indexer<3>(x.shape(), strides),
                    x.numel(), a.attrs.f("value"));
        return Outputs{out};
      }));
}

}  // namespace braid::cuda
