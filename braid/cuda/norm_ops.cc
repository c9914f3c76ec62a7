// CUDA kernels of the norm family (braid/ops/norm.cc): layer_norm, its fused
// backward and batch norm's running-statistics update, with the CPU kernels'
// attributes, outputs and errors, plus f16 and bf16 (stats stay f64).
// batch_norm itself is composite and runs on whatever its primitives run on.
#include "braid/base/error.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/norm_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// The input as rows of d = numel(normalized_shape), after the op's own
// inference has checked the shapes and dtypes (so errors read as the CPU's).
struct Rows {
  int64_t rows, d;
};

Rows rows_of(const char* name, const Args& a, const Tensor& x) {
  infer(name, a);
  const int64_t d = numel(a.attrs.ints("normalized_shape"));
  return {d > 0 ? x.numel() / d : 0, d};
}

Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? t.contiguous() : Tensor(); }

Outputs layer_norm_kernel(const Args& a) {
  const Tensor& x = a.inputs[0];
  const Rows r = rows_of("layer_norm", a, x);
  const Tensor xc = x.contiguous(), wc = contiguous_or_none(a.inputs[1]), bc = contiguous_or_none(a.inputs[2]);
  Tensor y = empty_on(x, x.shape(), x.dtype());
  Tensor stats = empty_on(x, {r.rows, 2}, DType::f64);
  layer_norm(x.dtype(), y.raw_data(), static_cast<double*>(stats.raw_data()), xc.raw_data(), data_or_null(wc),
             data_or_null(bc), r.rows, r.d, a.attrs.f("eps"));
  return Outputs{y, stats};
}

Outputs layer_norm_backward_kernel(const Args& a) {
  const Tensor& g = a.inputs[0];
  const Tensor& x = a.inputs[1];
  const Tensor& st = a.inputs[3];
  const Rows r = rows_of("layer_norm_backward", a, x);
  if (g.shape() != x.shape() || g.dtype() != x.dtype() || st.dtype() != DType::f64 || st.shape() != Shape{r.rows, 2}) {
    fail<ValueError>("layer_norm_backward: gradient {} {} and stats {} {} do not fit the input {} {}", name(g.dtype()),
                     to_string(g.shape()), name(st.dtype()), to_string(st.shape()), name(x.dtype()),
                     to_string(x.shape()));
  }
  const Tensor gc = g.contiguous(), xc = x.contiguous(), stats = st.contiguous(), wc = contiguous_or_none(a.inputs[2]);
  Tensor gx = empty_on(x, x.shape(), x.dtype());
  Tensor gxhat = a.attrs.b("weight_grad") ? empty_on(x, {r.rows, r.d}, x.dtype()) : Tensor();
  layer_norm_backward(x.dtype(), gx.raw_data(), gxhat.defined() ? gxhat.raw_data() : nullptr, gc.raw_data(),
                      xc.raw_data(), data_or_null(wc), static_cast<const double*>(stats.raw_data()), r.rows, r.d);
  return Outputs{gx, gxhat};
}

// In place through running's own strides: no copy back, unlike the CPU.
Outputs running_update_kernel(const Args& a) {
  const Tensor& running = a.inputs[0];
  const Tensor batch = a.inputs[1].contiguous();
  if (running.numel() != batch.numel() || running.dtype() != batch.dtype()) {
    fail<ValueError>("batch_norm_running_update_: running {} {} and batch {} {} differ", name(running.dtype()),
                     to_string(running.shape()), name(batch.dtype()), to_string(batch.shape()));
  }
  const double m = a.attrs.f("momentum"), scale = a.attrs.f("scale");
  const Shape* strides[1] = {&running.strides()};
  running_update(running.dtype(), running.raw_data(), make_indexer<1>(running.shape(), strides), batch.raw_data(),
                 running.numel(), 1 - m, m * scale);
  return Outputs{running};
}

}  // namespace

void install_norm_kernels(const op::KernelAdder& add) {
  add("layer_norm", cuda_kernel(kFloats, layer_norm_kernel));
  add("layer_norm_backward", cuda_kernel(kFloats, layer_norm_backward_kernel));
  add("batch_norm_running_update_", cuda_kernel(kFloats, running_update_kernel));
}

}  // namespace braid::cuda
