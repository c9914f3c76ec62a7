// CUDA kernels of the optimizer updates (braid/ops/update.cc): the CPU
// kernels' attributes, outputs and checks, with f16/bf16 parameters added to
// f32 (gradient and state each f32 or the parameter's dtype; see
// update_kernels.h). Unlike the CPU kernel, each tensor's size is checked
// against the parameter's: a short buffer would be read out of bounds.
#include "braid/base/error.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/update_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

const std::vector<DType> kParams = {DType::f32, DType::f16, DType::bf16};

// The parameter: contiguous f32, f16 or bf16.
void check_param(const Tensor& p, const char* op) {
  const DType d = p.dtype();
  if ((d != DType::f32 && d != DType::f16 && d != DType::bf16) || !p.is_contiguous()) {
    fail<ValueError>("{}: the parameter must be contiguous f32, f16 or bf16 (got {} {})", op, name(d),
                     to_string(p.shape()));
  }
}

// The gradient or a state buffer: contiguous, f32 or the parameter's dtype,
// as many elements as the parameter.
void check_operand(const Tensor& t, const Tensor& p, const char* op, const char* what) {
  if ((t.dtype() != DType::f32 && t.dtype() != p.dtype()) || !t.is_contiguous()) {
    const std::string dtypes = p.dtype() == DType::f32 ? "f32" : fmt::format("f32 or {}", name(p.dtype()));
    fail<ValueError>("{}: {} must be contiguous {} (got {} {})", op, what, dtypes, name(t.dtype()),
                     to_string(t.shape()));
  }
  if (t.numel() != p.numel()) {
    fail<ValueError>("{}: {} {} does not match the parameter {}", op, what, to_string(t.shape()),
                     to_string(p.shape()));
  }
}

// The f64 scalars, contiguous on the device, holding at least `count` values.
Tensor checked_scalars(const Tensor& scalars, int64_t count, const char* op) {
  for (int64_t i = 0; i < count; ++i) {
    if (scalars.dtype() != DType::f64 || scalars.numel() <= i) {
      fail<ValueError>("{}: scalars must be f64 with at least {} values (got {} {})", op, i + 1,
                       name(scalars.dtype()), to_string(scalars.shape()));
    }
  }
  return scalars.contiguous();
}

Outputs sgd(const Args& a) {
  const char* op = "sgd_update_";
  const Tensor& p = a.inputs[0];
  const Tensor& g = a.inputs[1];
  const Tensor& b = a.inputs[2];
  check_param(p, op);
  check_operand(g, p, op, "the gradient");
  const Tensor s = checked_scalars(a.inputs[3], 1, op);
  SgdConfig c{static_cast<float>(a.attrs.f("weight_decay")), 0.0f, 1.0f, false, false};
  if (b.defined()) {
    check_operand(b, p, op, "the momentum buffer");
    c.momentum = static_cast<float>(a.attrs.f("momentum"));
    c.damp = 1.0f - static_cast<float>(a.attrs.f("dampening"));
    c.first = a.attrs.b("first");
    c.nesterov = a.attrs.b("nesterov");
  }
  sgd_update(p.dtype(), g.dtype(), b.defined() ? b.dtype() : DType::f32, p.raw_data(), g.raw_data(),
             b.defined() ? b.raw_data() : nullptr, static_cast<const double*>(s.raw_data()), p.numel(), c);
  return {p, b};
}

Outputs adam(const Args& a) {
  const char* op = "adam_update_";
  const Tensor& p = a.inputs[0];
  const Tensor& g = a.inputs[1];
  const Tensor& m = a.inputs[2];
  const Tensor& v = a.inputs[3];
  check_param(p, op);
  check_operand(g, p, op, "the gradient");
  check_operand(m, p, op, "exp_avg");
  check_operand(v, p, op, "exp_avg_sq");
  if (m.dtype() != v.dtype()) {
    fail<ValueError>("{}: exp_avg {} and exp_avg_sq {} must have one dtype", op, name(m.dtype()), name(v.dtype()));
  }
  const Tensor s = checked_scalars(a.inputs[4], 2, op);
  const AdamConfig c{a.attrs.f("beta1"), a.attrs.f("beta2"), a.attrs.f("eps"), a.attrs.f("weight_decay"),
                     a.attrs.b("decoupled")};
  Tensor derived = empty_on(p, {4}, DType::f32);  // freed in stream order
  adam_update(p.dtype(), g.dtype(), m.dtype(), p.raw_data(), g.raw_data(), m.raw_data(), v.raw_data(),
              static_cast<const double*>(s.raw_data()), static_cast<float*>(derived.raw_data()), p.numel(), c);
  return {p, m, v};
}

}  // namespace

void install_update_kernels(const op::KernelAdder& add) {
  add("sgd_update_", cuda_kernel(kParams, sgd));
  add("adam_update_", cuda_kernel(kParams, adam));
}

}  // namespace braid::cuda
