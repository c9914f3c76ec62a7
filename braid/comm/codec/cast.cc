// fp16 / bf16: every value cast to 16 bits, 2x fewer bytes, no memory.
//
// The average is reduced in the half type itself, as PyTorch's
// fp16_compress_hook / bf16_compress_hook do: each rank casts, divides by the
// world size in the half type (so the sum cannot overflow fp16's 65504), and
// the all-reduce sums halves, rounding after every addition. Reducing in f32
// instead would keep the bytes saved only for an all-gather (W times the
// traffic) or need f32 partial sums on the ring's wire (no saving at all), so
// the half reduction is what makes the cast pay; its extra rounding is one
// half-ulp per hop, which the training tests show does not cost accuracy.
// The result is bitwise PyTorch's for 2 ranks (tests/parallel/codec_vs_torch.py).
#include <algorithm>
#include <chrono>

#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/device.h"
#include "braid/comm/codec/wire.h"
#include "braid/comm/reduce_op.h"

namespace braid::comm::codec {
namespace {

constexpr size_t kBlock = 256;  // floats widened at a time

template <class H>
class Cast final : public Codec {
 public:
  using Codec::Codec;

  void encode(std::span<const float> grad, std::span<const Matrix>, BucketState&, std::vector<std::byte>& message) override {
    message.resize(grad.size() * sizeof(H));
    narrow_half(grad.data(), reinterpret_cast<H*>(message.data()), grad.size());
  }

  void decode_add(std::span<const std::byte> message, std::span<const Matrix>, std::span<float> out) const override {
    if (message.size() != out.size() * sizeof(H))
      fail<ValueError>("{} message: {} bytes for {} values", o_.name, message.size(), out.size());
    const H* in = reinterpret_cast<const H*>(message.data());
    float block[kBlock];
    for (size_t lo = 0; lo < out.size(); lo += kBlock) {
      const size_t m = std::min(kBlock, out.size() - lo);
      widen_half(in + lo, block, m);
      for (size_t i = 0; i < m; ++i) out[lo + i] += block[i];
    }
  }

  size_t device_message_bytes(size_t n) const override { return n * sizeof(H); }
  // narrow(widen(narrow(g)) / 1) is narrow(g): the host message.
  void encode_on_device(DeviceCodecKernels& k, Device d, const float* grad, size_t n, BucketState&,
                        std::byte* message) override {
    k.cast_divide(d, grad, message, half_type(), n, 1.0f);
  }
  void decode_add_on_device(DeviceCodecKernels& k, Device d, const std::byte* message, size_t n,
                            float* out) const override {
    const std::shared_ptr<std::byte> wide = k.allocate(d, n * sizeof(float));
    k.widen(d, message, half_type(), reinterpret_cast<float*>(wide.get()), n);
    k.add(d, out, reinterpret_cast<const float*>(wide.get()), n);
  }

 protected:
  void combine(Communicator& comm, std::span<float> grad, std::span<const Matrix>, BucketState& state,
               const AverageOptions& o, CodecStats& stats) override {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    std::vector<H> half(grad.size());
    const float w = static_cast<float>(comm.size());
    // Two roundings, as `tensor.to(half).div_(world)`: the cast, then the
    // quotient (a true division, as torch's; in blocks that stay in cache).
    narrow_half(grad.data(), half.data(), grad.size());
    float block[kBlock];
    for (size_t lo = 0; lo < half.size(); lo += kBlock) {
      const size_t m = std::min(kBlock, half.size() - lo);
      widen_half(half.data() + lo, block, m);
      for (size_t i = 0; i < m; ++i) block[i] /= w;
      narrow_half(block, half.data() + lo, m);
    }
    const auto t1 = Clock::now();
    wait(comm.allreduce(half, {.op = Op::sum, .timeout = o.timeout}), comm, "all-reduce of halves", state, o);
    const auto t2 = Clock::now();
    widen_half(half.data(), grad.data(), grad.size());
    const auto t3 = Clock::now();
    stats.raw_bytes += grad.size_bytes();
    stats.wire_bytes += half.size() * sizeof(H);
    stats.encode_s += std::chrono::duration<double>(t1 - t0).count();
    stats.decode_s += std::chrono::duration<double>(t3 - t2).count();
    stats.calls++;
  }

  // The same on the device: cast and divide, the all-reduce of halves (NCCL
  // or the communicator's staging), widen.
  void combine_on_device(Communicator& comm, BufferRef grad, std::span<const Matrix>, BucketState& state,
                         const AverageOptions& o, CodecStats& stats) override {
    using Clock = std::chrono::steady_clock;
    DeviceCodecKernels& k = device_codec_kernels(grad.device);
    const size_t n = grad.count;
    auto* g = reinterpret_cast<float*>(grad.data);
    const auto t0 = Clock::now();
    const std::shared_ptr<std::byte> half = k.allocate(grad.device, n * sizeof(H));
    k.cast_divide(grad.device, g, half.get(), half_type(), n, static_cast<float>(comm.size()));
    const auto t1 = Clock::now();
    wait(comm.allreduce(BufferRef(half.get(), n, half_type(), grad.device), {.op = Op::sum, .timeout = o.timeout}),
         comm, "all-reduce of halves", state, o);
    const auto t2 = Clock::now();
    k.widen(grad.device, half.get(), half_type(), g, n);
    const auto t3 = Clock::now();
    stats.raw_bytes += grad.bytes();
    stats.wire_bytes += n * sizeof(H);
    stats.encode_s += std::chrono::duration<double>(t1 - t0).count();
    stats.decode_s += std::chrono::duration<double>(t3 - t2).count();
    stats.calls++;
  }

 private:
  static DType half_type() { return std::is_same_v<H, f16> ? DType::f16 : DType::bf16; }
};

}  // namespace

std::unique_ptr<Codec> make_cast_codec(const CodecOptions& options, DType half) {
  if (half == DType::f16) return std::make_unique<Cast<f16>>(options);
  if (half == DType::bf16) return std::make_unique<Cast<bf16>>(options);
  fail<ValueError>("cast codec: {} is not a 16-bit float type", name(half));
}

}  // namespace braid::comm::codec
