#include "braid/ops/update.h"

#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"

namespace braid {

namespace op {
namespace {

constexpr int64_t kGrain = 16384;  // elements per parallel_for chunk

float* f32_data(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() != DType::f32 || !t.is_contiguous()) {
    fail<ValueError>("{}: {} must be contiguous f32 (got {} {})", op, what, name(t.dtype()), to_string(t.shape()));
  }
  return t.data<float>();
}

double scalar_at(const Tensor& scalars, int64_t i, const char* op) {
  if (scalars.dtype() != DType::f64 || scalars.numel() <= i) {
    fail<ValueError>("{}: scalars must be f64 with at least {} values (got {} {})", op, i + 1, name(scalars.dtype()),
                     to_string(scalars.shape()));
  }
  return scalars.contiguous().data<double>()[i];
}

// b = first ? d : mom * b + damp * d, d = g + wd * p;  p -= lr * (nesterov ? d + mom * b : b).
// One branch-free loop per case with restrict pointers: the compiler
// vectorises it (a version with the branches inside did not, and measured
// 15 % of an MLP step).
template <bool kFirst, bool kNesterov>
void momentum_loop(float* __restrict p, const float* __restrict g, float* __restrict b, int64_t lo, int64_t hi,
                   float lr, float wd, float mom, float damp) {
  for (int64_t k = lo; k < hi; ++k) {
    const float d = g[k] + wd * p[k];
    const float bk = kFirst ? d : mom * b[k] + damp * d;
    b[k] = bk;
    p[k] -= lr * (kNesterov ? d + mom * bk : bk);
  }
}

Outputs sgd_kernel(const Args& a) {
  const char* op = "sgd_update_";
  float* p = f32_data(a.inputs[0], op, "the parameter");
  const float* g = f32_data(a.inputs[1], op, "the gradient");
  const float lr = static_cast<float>(scalar_at(a.inputs[3], 0, op));
  const float wd = static_cast<float>(a.attrs.f("weight_decay"));
  const int64_t n = a.inputs[0].numel();
  if (!a.inputs[2].defined()) {
    parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) p[k] -= lr * (g[k] + wd * p[k]);
    });
    return {a.inputs[0], a.inputs[2]};
  }
  float* b = f32_data(a.inputs[2], op, "the momentum buffer");
  const float mom = static_cast<float>(a.attrs.f("momentum")), damp = 1.0f - static_cast<float>(a.attrs.f("dampening"));
  const bool first = a.attrs.b("first"), nesterov = a.attrs.b("nesterov");
  parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    if (first) {
      nesterov ? momentum_loop<true, true>(p, g, b, lo, hi, lr, wd, mom, damp)
               : momentum_loop<true, false>(p, g, b, lo, hi, lr, wd, mom, damp);
    } else {
      nesterov ? momentum_loop<false, true>(p, g, b, lo, hi, lr, wd, mom, damp)
               : momentum_loop<false, false>(p, g, b, lo, hi, lr, wd, mom, damp);
    }
  });
  return {a.inputs[0], a.inputs[2]};
}

// One parameter's Adam step: inputs[first..first+3] are p, g, m, v.
void adam_one(const Args& a, int first, const Tensor& scalars, const char* op) {
  float* p = f32_data(a.inputs[first], op, "the parameter");
  const float* g = f32_data(a.inputs[first + 1], op, "the gradient");
  float* m = f32_data(a.inputs[first + 2], op, "exp_avg");
  float* v = f32_data(a.inputs[first + 3], op, "exp_avg_sq");
  const double lr = scalar_at(scalars, 0, op), t = scalar_at(scalars, 1, op);
  const double beta1 = a.attrs.f("beta1"), beta2 = a.attrs.f("beta2"), wd = a.attrs.f("weight_decay");
  const bool decoupled = a.attrs.b("decoupled");
  // Scalars in double as PyTorch computes them (Python floats), used in float.
  const double bc1 = 1 - std::pow(beta1, t);
  const double bc2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_bc2_sqrt = static_cast<float>(1 / bc2_sqrt);
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float eps = static_cast<float>(a.attrs.f("eps"));
  const float decay = decoupled ? static_cast<float>(1 - lr * wd) : 1.0f;
  const float l2 = decoupled ? 0.0f : static_cast<float>(wd);
  parallel_for(0, a.inputs[first].numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const float pk = p[k] * decay;
      const float gk = g[k] + l2 * pk;
      const float mk = b1 * m[k] + (1 - b1) * gk;
      const float vk = b2 * v[k] + (1 - b2) * gk * gk;
      m[k] = mk;
      v[k] = vk;
      p[k] = pk - step_size * mk / (std::sqrt(vk) * inv_bc2_sqrt + eps);
    }
  });
}

Outputs adam_kernel(const Args& a) {
  adam_one(a, 0, a.inputs[4], "adam_update_");
  return {a.inputs[0], a.inputs[2], a.inputs[3]};
}

// The blocks sum_squares_multi sums each tensor in (update.h).
constexpr int64_t kSquaresBlock = 1024;

Outputs sum_squares_multi_kernel(const Args& a) {
  double total = 0;
  for (const Tensor& t : a.inputs) {
    const float* x = f32_data(t, "sum_squares_multi", "each tensor");
    for (int64_t b = 0; b < t.numel(); b += kSquaresBlock) {
      const int64_t e = std::min(t.numel(), b + kSquaresBlock);
      float part = 0;
      for (int64_t k = b; k < e; ++k) part += x[k] * x[k];
      total += part;
    }
  }
  Tensor out = Tensor::empty({}, DType::f64);
  *out.data<double>() = total;
  return {out};
}

Outputs scale_multi_kernel(const Args& a) {
  const float c = static_cast<float>(a.attrs.f("factor"));
  for (const Tensor& t : a.inputs) {
    float* x = f32_data(t, "scale_multi_", "each tensor");
    parallel_for(0, t.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) x[k] *= c;
    });
  }
  return {a.inputs[0]};
}

// Inputs: scalars, then (p, g, m, v) per parameter.
void check_multi_count(size_t n) {
  if (n < 5 || (n - 1) % 4 != 0) {
    fail<ValueError>("adam_update_multi_: takes the scalars and 4 tensors per parameter, got {} inputs", n);
  }
}

Outputs adam_multi_kernel(const Args& a) {
  check_multi_count(a.inputs.size());
  for (size_t i = 1; i < a.inputs.size(); i += 4) {
    if (a.inputs[i].numel() != a.inputs[i + 1].numel() || a.inputs[i].numel() != a.inputs[i + 2].numel() ||
        a.inputs[i].numel() != a.inputs[i + 3].numel()) {
      fail<ValueError>("adam_update_multi_: parameter {} {} and its gradient {} and state {}, {} differ in size",
                       (i - 1) / 4, to_string(a.inputs[i].shape()), to_string(a.inputs[i + 1].shape()),
                       to_string(a.inputs[i + 2].shape()), to_string(a.inputs[i + 3].shape()));
    }
    adam_one(a, static_cast<int>(i), a.inputs[0], "adam_update_multi_");
  }
  return {a.inputs[1]};
}

// flops per element: a handful of multiply-adds (and a sqrt and a divide for Adam).
CostFn per_element(double flops, int tensors) {
  return [flops, tensors](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
    const double n = static_cast<double>(numel(in[0].shape));
    return Cost{flops * n, 2.0 * tensors * bytes_of(in[0]), 1};
  };
}

}  // namespace

void define_update_ops(const Definer& define) {
  define({.name = "sgd_update_", .family = "optimizer", .inputs = 4, .outputs = 2, .effect = Effect::inplace,
          .mutates = {0, 2}, .infer = same_as(0), .kernels = {cpu_kernel({DType::f32}, sgd_kernel)},
          .cost = per_element(5, 3)});
  define({.name = "adam_update_", .family = "optimizer", .inputs = 5, .outputs = 3, .effect = Effect::inplace,
          .mutates = {0, 2, 3}, .infer = same_as(0), .kernels = {cpu_kernel({DType::f32}, adam_kernel)},
          .cost = per_element(14, 4)});
  define({.name = "sum_squares_multi", .family = "optimizer", .inputs = -1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (in.empty()) fail<ValueError>("sum_squares_multi: needs at least one tensor");
            return Metas{{{}, DType::f64}};
          },
          .kernels = {cpu_kernel({DType::f32}, sum_squares_multi_kernel)},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            double n = 0;
            for (const TensorMeta& m : in) n += static_cast<double>(numel(m.shape));
            return Cost{2 * n, 4 * n, log2_depth(n)};
          }});
  define({.name = "scale_multi_", .family = "optimizer", .inputs = -1, .effect = Effect::inplace, .mutates = {0},
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (in.empty()) fail<ValueError>("scale_multi_: needs at least one tensor");
            return Metas{in[0]};
          },
          .kernels = {cpu_kernel({DType::f32}, scale_multi_kernel)},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            double n = 0;
            for (const TensorMeta& m : in) n += static_cast<double>(numel(m.shape));
            return Cost{n, 8 * n, 1};
          }});
  define({.name = "adam_update_multi_", .family = "optimizer", .inputs = -1, .outputs = 1, .dtype_input = 1,
          .effect = Effect::inplace, .mutates = {1},
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_multi_count(in.size());
            return Metas{in[1]};
          },
          .kernels = {cpu_kernel({DType::f32}, adam_multi_kernel)},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            double n = 0;  // elements over every parameter
            for (size_t i = 1; i < in.size(); i += 4) n += static_cast<double>(numel(in[i].shape));
            return Cost{14 * n, 4 * 4 * n, 1};  // as adam_update_ on each
          }});
}

}  // namespace op

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& buffer, const Tensor& scalars,
                 const SgdUpdate& o) {
  op::call(BRAID_OP("sgd_update_"), {param, grad, buffer, scalars},
           {{"weight_decay", o.weight_decay}, {"momentum", o.momentum}, {"dampening", o.dampening},
            {"nesterov", int64_t{o.nesterov}}, {"first", int64_t{o.first}}});
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& scalars, const AdamUpdate& o) {
  op::call(BRAID_OP("adam_update_"), {param, grad, exp_avg, exp_avg_sq, scalars},
           {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay},
            {"decoupled", int64_t{o.decoupled}}});
}

Tensor sum_squares_multi(std::span<const Tensor> tensors) {
  return op::call1(BRAID_OP("sum_squares_multi"), tensors);
}

void scale_multi_(std::span<const Tensor> tensors, double factor) {
  op::call(BRAID_OP("scale_multi_"), tensors, {{"factor", factor}});
}

void adam_update_multi_(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs, const Tensor& scalars,
                        const AdamUpdate& o) {
  if (params.empty() || grads.size() != params.size() || exp_avgs.size() != params.size() ||
      exp_avg_sqs.size() != params.size()) {
    fail<ValueError>("adam_update_multi_: {} parameters, {} gradients, {} and {} state buffers (equal, at least 1)",
                     params.size(), grads.size(), exp_avgs.size(), exp_avg_sqs.size());
  }
  std::vector<Tensor> in{scalars};
  in.reserve(1 + 4 * params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    in.insert(in.end(), {params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]});
  }
  op::call(BRAID_OP("adam_update_multi_"), in,
           {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay},
            {"decoupled", int64_t{o.decoupled}}});
}

}  // namespace braid
