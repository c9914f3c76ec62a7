// CUDA kernels of the tensor family (braid/ops/tensor_ops.cc): conversion,
// copies and in-place accumulation, through the backend's strided copy and
// the elementwise add.
#include "braid/base/error.h"
#include "braid/cuda/elementwise_kernels.h"
#include "braid/cuda/kernels.h"

namespace braid::cuda {

void install_tensor_kernels(const op::KernelAdder& add) {
  using Outputs = std::vector<Tensor>;
  add("cast", cuda_kernel({}, [](const op::Args& a) {
        Tensor out = empty_on(a.inputs[0], a.inputs[0].shape(), static_cast<DType>(a.attrs.i("dtype")));
        out.copy_from(a.inputs[0]);
        return Outputs{out};
      }));
  add("clone", cuda_kernel({}, [](const op::Args& a) { return Outputs{a.inputs[0].clone()}; }));
  add("copy_", cuda_kernel({}, [](const op::Args& a) {
        a.inputs[0].copy_from(a.inputs[1]);
        return Outputs{a.inputs[0]};
      }));
  add("accumulate_", cuda_kernel(kNumbers, [](const op::Args& a) {
        const Tensor& dst = a.inputs[0];
        const Tensor& src = a.inputs[1];
        if (dst.dtype() != src.dtype() || dst.shape() != src.shape()) {
          fail<ValueError>("accumulate_: {} {} += {} {}", name(dst.dtype()), to_string(dst.shape()),
                           name(src.dtype()), to_string(src.shape()));
        }
        const Shape* strides[3] = {&dst.strides(), &dst.strides(), &src.strides()};
        binary(BinaryOp::add, dst.dtype(), dst.raw_data(), dst.raw_data(), src.raw_data(),
               make_indexer<3>(dst.shape(), strides), dst.numel());
        return Outputs{dst};
      }));
}

}  // namespace braid::cuda
