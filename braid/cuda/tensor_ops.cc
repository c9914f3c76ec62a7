// The CUDA kernel of accumulate_ (braid/ops/tensor_ops.cc), through the
// elementwise add; cast, clone and copy_ are Tensor copies, whose one kernel
// serves every device (every_device in braid/ops/define.h).
#include "braid/base/error.h"
#include "braid/cuda/elementwise_kernels.h"
#include "braid/cuda/kernels.h"

namespace braid::cuda {

void install_tensor_kernels(const op::KernelAdder& add) {
  using Outputs = std::vector<Tensor>;
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
