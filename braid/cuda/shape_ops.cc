// CUDA kernels of the shape family's copying ops (braid/ops/shape.cc):
// slice_backward and concat, as the CPU writes them — fresh memory filled
// through strided views and the backend's strided copy (copy_kernels.cu), so
// they need no kernels of their own. The views (reshape, permute, slice, ...)
// need none at all: the registry runs their meta kernel on any device.
#include <algorithm>

#include "braid/base/error.h"
#include "braid/cuda/kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// shape.cc's SliceSpec: a slice along one dim, start/end clamped as Python
// slicing does.
struct SliceSpec {
  int64_t dim, start, end, step;
  int64_t size() const { return end > start ? (end - start + step - 1) / step : 0; }
};

SliceSpec slice_spec(const Shape& in, const op::Attrs& a) {
  const int64_t nd = static_cast<int64_t>(in.size());
  const int64_t d = wrap_dim(a.i("dim"), nd, "slice");
  if (nd == 0) fail<IndexError>("slice: cannot slice a 0-d tensor");
  const int64_t step = a.i("step");
  if (step < 1) fail<ValueError>("slice: step must be >= 1, got {} (input {})", step, to_string(in));
  const int64_t n = in[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  return {d, clamp(a.i("start")), clamp(a.i("end")), step};
}

Tensor slice_view(const Tensor& x, const SliceSpec& s) {
  Shape shape = x.shape(), strides = x.strides();
  shape[s.dim] = s.size();
  strides[s.dim] *= s.step;
  return x.as_strided(shape, strides, x.offset() + (shape[s.dim] > 0 ? s.start * x.strides()[s.dim] : 0));
}

std::string shapes_of(std::span<const Tensor> xs) {
  std::string s;
  for (const Tensor& x : xs) {
    s += (s.empty() ? "" : ", ") + (x.defined() ? to_string(x.shape()) + " " + std::string(name(x.dtype())) : "[] f32");
  }
  return s;
}

// shape.cc's concat_shape: every input agrees in dtype and all dims but `dim`.
Shape concat_shape(std::span<const Tensor> xs, int64_t dim) {
  if (xs.empty()) fail<ValueError>("concat: no tensors given");
  const Tensor& first = xs[0];
  if (!first.defined() || first.ndim() == 0) {
    fail<ValueError>("concat: cannot concatenate 0-d tensors ({})", shapes_of(xs));
  }
  const int64_t d = wrap_dim(dim, first.ndim(), "concat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& x : xs) {
    bool ok = x.defined() && x.dtype() == first.dtype() && x.ndim() == first.ndim();
    for (int64_t i = 0; ok && i < x.ndim(); ++i) ok = i == d || x.shape()[i] == first.shape()[i];
    if (!ok) fail<ValueError>("concat: tensors must agree in dtype and in every dim but {}: {}", dim, shapes_of(xs));
    shape[d] += x.shape()[d];
  }
  return shape;
}

}  // namespace

void install_shape_kernels(const op::KernelAdder& add) {
  // Zeros of `shape` with the slice (dim, start, end, step) set to the input.
  add("slice_backward", cuda_kernel({}, [](const Args& a) {
        const Shape& shape = a.attrs.ints("shape");
        const Tensor& g = a.inputs[0];
        Tensor gx = Tensor::zeros(shape, g.dtype(), g.device());
        slice_view(gx, slice_spec(shape, a.attrs)).copy_from(g);
        return Outputs{gx};
      }));
  // One strided copy per input into its slice of the output.
  add("concat", cuda_kernel({}, [](const Args& a) {
        const Shape shape = concat_shape(a.inputs, a.attrs.i("dim"));
        const int64_t d = wrap_dim(a.attrs.i("dim"), static_cast<int64_t>(shape.size()), "concat");
        Tensor y = empty_on(a.inputs[0], shape, a.inputs[0].dtype());
        int64_t at = 0;
        for (const Tensor& x : a.inputs) {
          slice_view(y, {d, at, at + x.shape()[d], 1}).copy_from(x);
          at += x.shape()[d];
        }
        return Outputs{y};
      }));
}

}  // namespace braid::cuda
