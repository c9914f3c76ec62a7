// CUDA kernels of the softmax family (braid/ops/softmax.cc): the CPU
// kernels' attributes and shapes (braid/tensor/cpu/reduce.cc), plus f16 and
// bf16. Like the CPU, inputs are made contiguous and viewed as [A, R, B]
// around the softmax dim; outputs are fresh and contiguous.
#include "braid/base/error.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/softmax_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

struct Arb {
  int64_t A = 1, R = 1, B = 1;
};

// [A, R, B] sizes of `shape` around `dim` (a 0-d tensor is one row of one).
Arb split_at(const Shape& shape, int64_t dim, const char* name) {
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), name);
  Arb s;
  if (shape.empty()) return s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) (i < d ? s.A : i == d ? s.R : s.B) *= shape[i];
  return s;
}

Tensor softmax_of(const Tensor& x, int64_t dim, bool log, const char* name) {
  const Arb s = split_at(x.shape(), dim, name);
  const Tensor xc = x.contiguous();
  Tensor y = empty_on(x, x.shape(), x.dtype());
  softmax(x.dtype(), y.raw_data(), xc.raw_data(), s.A, s.R, s.B, log);
  return y;
}

Tensor softmax_grad(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  if (g.shape() != y.shape() || g.dtype() != y.dtype()) {
    fail<ValueError>("{}: gradient {} {} and output {} {} differ", name, braid::name(g.dtype()), to_string(g.shape()),
                     braid::name(y.dtype()), to_string(y.shape()));
  }
  const Arb s = split_at(y.shape(), dim, name);
  const Tensor gc = g.contiguous(), yc = y.contiguous();
  Tensor gx = empty_on(y, y.shape(), y.dtype());
  softmax_backward(y.dtype(), gx.raw_data(), gc.raw_data(), yc.raw_data(), s.A, s.R, s.B, log);
  return gx;
}

}  // namespace

void install_softmax_kernels(const op::KernelAdder& add) {
  for (bool log : {false, true}) {
    const char* name = log ? "log_softmax" : "softmax";
    add(name, cuda_kernel(kFloats, [name, log](const Args& a) {
          return Outputs{softmax_of(a.inputs[0], a.attrs.i("dim"), log, name)};
        }));
    add(log ? "log_softmax_backward" : "softmax_backward", cuda_kernel(kFloats, [log](const Args& a) {
          return Outputs{softmax_grad(a.inputs[0], a.inputs[1], a.attrs.i("dim"), log)};
        }));
  }
}

}  // namespace braid::cuda
