// The codecs' device kernels behind comm::codec::DeviceCodecKernels
// (braid/comm/codec/device.h): memory from the caching allocator (stream
// ordered, so scratch freed on return is reused only after the kernels that
// read it), kernels from codec_kernels.cu on the calling thread's current
// stream of the buffers' GPU.
#include "braid/comm/codec/device.h"
#include "braid/cuda/codec_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/memory.h"

namespace braid::cuda {

namespace {

namespace cc = comm::codec;

int64_t count(size_t n) { return static_cast<int64_t>(n); }

class CodecKernels final : public cc::DeviceCodecKernels {
 public:
  std::shared_ptr<std::byte> allocate(Device device, size_t bytes) override {
    use_gpu(device.index);
    Tensor block = Tensor::zeros({count(bytes)}, DType::u8, device);
    auto* p = static_cast<std::byte*>(block.raw_data());
    return std::shared_ptr<std::byte>(p, [block](std::byte*) mutable { block = Tensor(); });
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    copy_bytes(dst, dst_device, src, src_device, bytes);
  }
  void add(Device d, float* x, const float* y, size_t n) override { on(d); codec_add(x, y, count(n)); }
  void scale(Device d, float* x, size_t n, float factor) override { on(d); codec_scale(x, count(n), factor); }
  void zero(Device d, float* x, size_t n) override { on(d); codec_zero(x, count(n)); }
  void cast_divide(Device d, const float* grad, void* half, DType half_type, size_t n, float world) override {
    on(d); codec_cast_divide(half_type, grad, half, count(n), world);
  }
  void widen(Device d, const void* half, DType half_type, float* out, size_t n) override {
    on(d); codec_widen(half_type, half, out, count(n));
  }
  void qsgd_encode(Device d, const float* grad, size_t n, uint32_t s, size_t chunk, cc::QsgdDraw draw,
                   std::byte* message) override {
    on(d);
    const Tensor codes = Tensor::empty({count(n)}, DType::i32, d);  // scratch: a u32 per value
    cuda::qsgd_encode(grad, count(n), s, count(chunk), draw.key, draw.stream, static_cast<uint32_t*>(codes.raw_data()),
                      message);
  }
  void qsgd_decode_add(Device d, const std::byte* message, size_t n, uint32_t s, size_t chunk, float* out) override {
    on(d); cuda::qsgd_decode_add(message, count(n), s, count(chunk), out);
  }
  void onebit_encode(Device d, float* x, size_t n, size_t chunk, bool keep_error, std::byte* message) override {
    on(d); cuda::onebit_encode(x, count(n), count(chunk), keep_error, message);
  }
  void onebit_decode_add(Device d, const std::byte* message, size_t n, size_t chunk, float* out) override {
    on(d); cuda::onebit_decode_add(message, count(n), count(chunk), out);
  }
  void topk_encode(Device d, float* x, size_t n, size_t k, bool keep_error, std::byte* message) override {
    on(d);
    const Tensor scratch = Tensor::empty({count(topk_scratch_bytes(count(n)))}, DType::u8, d);
    cuda::topk_encode(x, count(n), count(k), keep_error, scratch.raw_data(), message);
  }
  void topk_decode_add(Device d, const std::byte* message, size_t n, size_t k, float* out) override {
    on(d); cuda::topk_decode_add(message, count(n), count(k), out);
  }

 private:
  static void on(Device d) { use_gpu(d.index); }
};

}  // namespace

void install_codec_kernels() {
  static CodecKernels kernels;
  cc::set_device_codec_kernels(DeviceType::cuda, &kernels);
}

}  // namespace braid::cuda
