// CUDA kernels of the optimizer updates (braid/ops/update.cc): the CPU
// kernels' attributes, outputs and checks, with f16/bf16 parameters added to
// f32 (gradient and state each f32 or the parameter's dtype; see
// update_kernels.h). Unlike the CPU kernel, each tensor's size is checked
// against the parameter's: a short buffer would be read out of bounds.
#include <algorithm>

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

// Inputs: scalars, then (p, g, m, v) per parameter, each checked as
// adam_update_ checks its own; tensors of one dtype mix go to the device
// together (usually all of them: one mix).
Outputs adam_multi(const Args& a) {
  const char* op = "adam_update_multi_";
  infer(op, a);  // the input count
  const Tensor s = checked_scalars(a.inputs[0], 2, op);
  const AdamConfig c{a.attrs.f("beta1"), a.attrs.f("beta2"), a.attrs.f("eps"), a.attrs.f("weight_decay"),
                     a.attrs.b("decoupled")};
  struct Mix {
    DType p, g, s;
    std::vector<AdamTensors> tensors;
  };
  std::vector<Mix> mixes;
  for (size_t i = 1; i < a.inputs.size(); i += 4) {
    const Tensor &p = a.inputs[i], &g = a.inputs[i + 1], &m = a.inputs[i + 2], &v = a.inputs[i + 3];
    check_param(p, op);
    check_operand(g, p, op, "the gradient");
    check_operand(m, p, op, "exp_avg");
    check_operand(v, p, op, "exp_avg_sq");
    if (m.dtype() != v.dtype()) {
      fail<ValueError>("{}: exp_avg {} and exp_avg_sq {} must have one dtype", op, name(m.dtype()), name(v.dtype()));
    }
    auto mix = std::find_if(mixes.begin(), mixes.end(),
                            [&](const Mix& x) { return x.p == p.dtype() && x.g == g.dtype() && x.s == m.dtype(); });
    if (mix == mixes.end()) mix = mixes.insert(mixes.end(), Mix{p.dtype(), g.dtype(), m.dtype(), {}});
    mix->tensors.push_back({p.raw_data(), g.raw_data(), m.raw_data(), v.raw_data(), p.numel()});
  }
  const Tensor& first = a.inputs[1];
  for (const Mix& mix : mixes) {
    Tensor derived = empty_on(first, {4}, DType::f32);  // freed in stream order
    adam_update_multi(mix.p, mix.g, mix.s, mix.tensors.data(), static_cast<int64_t>(mix.tensors.size()),
                      static_cast<const double*>(s.raw_data()), static_cast<float*>(derived.raw_data()), c);
  }
  return {first};
}

Outputs sum_squares(const Args& a) {
  const char* op = "sum_squares_multi";
  infer(op, a);
  std::vector<const float*> tensors;
  std::vector<int64_t> sizes;
  int64_t blocks = 0;
  for (const Tensor& t : a.inputs) {
    if (t.dtype() != DType::f32 || !t.is_contiguous()) {
      fail<ValueError>("{}: each tensor must be contiguous f32 (got {} {})", op, name(t.dtype()), to_string(t.shape()));
    }
    tensors.push_back(ptr<float>(t));
    sizes.push_back(t.numel());
    blocks += squares_blocks(t.numel());
  }
  const Tensor& first = a.inputs[0];
  Tensor out = empty_on(first, {}, DType::f64);
  Tensor partials = empty_on(first, {std::max<int64_t>(blocks, 1)}, DType::f32);  // freed in stream order
  sum_squares_multi(tensors.data(), sizes.data(), static_cast<int64_t>(tensors.size()), ptr<float>(partials),
                    ptr<double>(out));
  return {out};
}

Outputs scale(const Args& a) {
  const char* op = "scale_multi_";
  infer(op, a);
  std::vector<float*> tensors;
  std::vector<int64_t> sizes;
  for (const Tensor& t : a.inputs) {
    if (t.dtype() != DType::f32 || !t.is_contiguous()) {
      fail<ValueError>("{}: each tensor must be contiguous f32 (got {} {})", op, name(t.dtype()), to_string(t.shape()));
    }
    tensors.push_back(ptr<float>(t));
    sizes.push_back(t.numel());
  }
  scale_multi(tensors.data(), sizes.data(), static_cast<int64_t>(tensors.size()),
              static_cast<float>(a.attrs.f("factor")));
  return {a.inputs[0]};
}

}  // namespace

void install_update_kernels(const op::KernelAdder& add) {
  add("scale_multi_", cuda_kernel({DType::f32}, scale));
  add("sum_squares_multi", cuda_kernel({DType::f32}, sum_squares));
  add("sgd_update_", cuda_kernel(kParams, sgd));
  add("adam_update_", cuda_kernel(kParams, adam));
  add("adam_update_multi_", cuda_kernel(kParams, adam_multi));
}

}  // namespace braid::cuda
