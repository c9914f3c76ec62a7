// The CUDA device behind braid's tensors — memory (memory.h), strided copies
// with conversion, fills — and the registrar that installs it and every op
// family's kernels when this library is linked (whole, see CMakeLists.txt).
#include "braid/base/error.h"
#include "braid/cuda/copy_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/memory.h"
#include "braid/tensor/backend.h"

#if defined(BRAID_CUDA_EMULATE)
#include "braid/cuda/emulated/state.h"
#else
// Named by the link options of braid_cuda (CMakeLists.txt): the linker keeps
// this file, and with it the registrar below.
extern "C" {
int braid_cuda_backend_anchor = 0;
}
#endif

namespace braid::cuda {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape out(shape.size(), 0);
  const size_t lead = shape.size() - t.shape().size();
  for (size_t d = 0; d < t.shape().size(); ++d) {
    out[lead + d] = t.shape()[d] == 1 ? 0 : t.strides()[d];
  }
  return out;
}

std::vector<op::TensorMeta> infer(const char* name, const op::Args& a) {
  std::vector<op::TensorMeta> in;
  for (const Tensor& t : a.inputs) in.push_back(op::meta_of(t));
  return op::find(name).infer(in, a.attrs);
}

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  int device_count() override { return gpu_count(); }
  void* allocate(size_t nbytes, int index) override { return device_allocate(nbytes, index); }
  void deallocate(void* p, int index) override { device_free(p, index); }
  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) override {
    cuda::copy_bytes(dst, dst_device, src, src_device, nbytes);
  }
  void copy_strided(const StridedRef& dst, const StridedRef& src, int index) override {
    use_gpu(index);
#if defined(BRAID_CUDA_EMULATE)
    // Bytes read and written, the figure a step's budget of casts and copies counts.
    auto& c = emulated::state().counters;
    const int64_t bytes = numel(dst.shape) * static_cast<int64_t>(itemsize(dst.dtype) + itemsize(src.dtype));
    (dst.dtype == src.dtype ? c.copy_bytes : c.cast_bytes) += bytes;
    ++(dst.dtype == src.dtype ? c.copies : c.casts);
#endif
    const Shape* strides[2] = {&dst.strides, &src.strides};
    copy_cast(dst.dtype, dst.data, src.dtype, src.data, make_indexer<2>(dst.shape, strides), numel(dst.shape));
  }
  void fill(const StridedRef& dst, double value, int index) override {
    use_gpu(index);
    const Shape* strides[1] = {&dst.strides};
    cuda::fill(dst.dtype, dst.data, value, make_indexer<1>(dst.shape, strides), numel(dst.shape));
  }
  void synchronize(int index) override { synchronize_gpu(index); }
};

// Kernels run on the GPU their inputs are on.
op::KernelAdder on_input_gpu(const op::KernelAdder& add) {
  return [add](std::string_view name, op::KernelEntry entry) {
    if (entry.device.is_cuda()) {
      entry.fn = [fn = std::move(entry.fn)](const op::Args& a) {
        for (const Tensor& t : a.inputs) {
          if (t.defined()) {
            use_gpu(t.device().index);
            break;
          }
        }
        return fn(a);
      };
    }
    add(name, std::move(entry));
  };
}

}  // namespace

void install_backend() {
  static CudaBackend backend;
  set_backend(DeviceType::cuda, &backend);
  install_codec_kernels();
  op::on_registry_ready([](const op::KernelAdder& add) { install_kernels(on_input_gpu(add)); });
}

#if !defined(BRAID_CUDA_EMULATE)
namespace {
const bool registered = (install_backend(), true);
}  // namespace
#endif

void install_kernels(const op::KernelAdder& add) {
  install_tensor_kernels(add);
  install_elementwise_kernels(add);
  install_matmul_kernels(add);
  install_conv_kernels(add);
  install_reduce_kernels(add);
  install_softmax_kernels(add);
  install_loss_kernels(add);
  install_index_kernels(add);
  install_embedding_bag_kernels(add);
  install_dropout_kernels(add);
  install_update_kernels(add);
  install_norm_kernels(add);
  install_attention_kernels(add);
}

}  // namespace braid::cuda
