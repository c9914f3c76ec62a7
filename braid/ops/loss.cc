#include "braid/ops/loss.h"

#include <cmath>

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/tensor/cpu/reduce.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid {

namespace {

using autograd::record;
using Grads = std::vector<Tensor>;

template <class Fn>
void dispatch_float(const Tensor& x, const char* name, Fn&& fn) {
  if (x.dtype() == DType::f32) return fn(float{});
  if (x.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", name, braid::name(x.dtype()),
                   to_string(x.shape()));
}

// Checks x [N, C] against targets i64 [N] with values in [0, C); returns the
// targets contiguous.
Tensor checked_targets(const char* name, const Tensor& x, const Tensor& targets) {
  if (x.ndim() != 2 || targets.ndim() != 1 || targets.size(0) != x.size(0)) {
    fail<ValueError>("{}: expected input [N, C] and targets [N], got {} and {}", name, to_string(x.shape()),
                     to_string(targets.shape()));
  }
  if (targets.dtype() != DType::i64) {
    fail<ValueError>("{}: targets must be i64, got {} {}", name, braid::name(targets.dtype()),
                     to_string(targets.shape()));
  }
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

// -mean_i logp[i, t[i]] as a 0-d tensor of logp's dtype.
Tensor mean_picked(const char* name, const Tensor& logp, const Tensor& t) {
  Tensor out = Tensor::empty({}, logp.dtype());
  dispatch_float(logp, name, [&](auto zero) {
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

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  const Tensor t = checked_targets("cross_entropy", logits, targets);
  const Tensor logp = cpu::softmax(logits, 1, true, "cross_entropy");  // fresh, contiguous [N, C]
  Tensor loss = mean_picked("cross_entropy", logp, t);
  record("cross_entropy", {logits}, loss, [logp, t](const Tensor& g) {
    Tensor gx = Tensor::empty(logp.shape(), logp.dtype());
    dispatch_float(logp, "cross_entropy", [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = logp.size(0), c = logp.size(1);
      const T scale = static_cast<T>(g.item() / static_cast<double>(n));
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
    return Grads{gx};
  });
  return loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets) {
  const Tensor t = checked_targets("nll_loss", log_probs, targets);
  Tensor loss = mean_picked("nll_loss", log_probs.contiguous(), t);
  record("nll_loss", {log_probs}, loss, [shape = log_probs.shape(), dtype = log_probs.dtype(), t](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, dtype);
    dispatch_float(gx, "nll_loss", [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = shape[0], c = shape[1];
      const T v = static_cast<T>(-g.item() / static_cast<double>(n));
      for (int64_t i = 0; i < n; ++i) gx.data<T>()[i * c + t.data<int64_t>()[i]] = v;
    });
    return Grads{gx};
  });
  return loss;
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
  if (logits.shape() != targets.shape() || logits.dtype() != targets.dtype()) {
    fail<ValueError>("bce_with_logits: logits {} {} and targets {} {} must match in shape and dtype",
                     name(logits.dtype()), to_string(logits.shape()), name(targets.dtype()), to_string(targets.shape()));
  }
  const Tensor x = logits.contiguous(), y = targets.contiguous();
  const int64_t n = x.numel();
  Tensor loss = Tensor::empty({}, x.dtype());
  dispatch_float(x, "bce_with_logits", [&](auto zero) {
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
  record("bce_with_logits", {logits, targets}, loss, [x = x.detach(), y = y.detach(), rx = logits.requires_grad(),
                                                     ry = targets.requires_grad()](const Tensor& g) {
    Tensor gx = rx ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    Tensor gy = ry ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    dispatch_float(x, "bce_with_logits", [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* yp = y.data<T>();
      const T scale = static_cast<T>(g.item() / static_cast<double>(x.numel()));
      // d/dx = sigmoid(x) - y;  d/dy = -x.
      for (int64_t i = 0; i < x.numel(); ++i) {
        if (rx) gx.data<T>()[i] = (T{1} / (T{1} + std::exp(-xp[i])) - yp[i]) * scale;
        if (ry) gy.data<T>()[i] = -xp[i] * scale;
      }
    });
    return Grads{gx, gy};
  });
  return loss;
}

}  // namespace braid
