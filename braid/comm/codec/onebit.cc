// 1-bit SGD with error feedback (Seide et al., Interspeech 2014).
//
// x = grad + memory. Per chunk of codec.onebit_chunk values, each value is
// sent as its sign, and decoded as the mean of the chunk's values of that
// sign (the two reconstruction points that minimise the chunk's squared
// error); memory = x - decoded carries the quantisation error into the next
// step, so over steps nothing is lost: sum of decoded + final memory = sum of
// gradients. Message: n, chunk, two f32 per chunk, one bit per value: 32x
// fewer bytes than f32 for long chunks (256 values: 28x).
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/device.h"
#include "braid/comm/codec/wire.h"

namespace braid::comm::codec {
namespace {

class OneBit final : public Codec {
 public:
  using Codec::Codec;

  void encode(std::span<const float> grad, std::span<const Matrix>, BucketState& state,
              std::vector<std::byte>& message) override {
    const size_t n = grad.size(), chunk = static_cast<size_t>(o_.onebit_chunk);
    const size_t chunks = chunk_count(n, chunk);
    std::vector<float> x(grad.begin(), grad.end());
    if (o_.error_feedback) {
      const std::vector<float>& m = state.tensor("memory", n);
      for (size_t i = 0; i < n; ++i) x[i] += m[i];
    }
    message.clear();
    Writer w(message);
    w.put<uint64_t>(n);
    w.put<uint64_t>(chunk);
    std::vector<float> scales(2 * chunks);
    std::vector<uint32_t> signs(n);
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk, end = std::min(n, begin + chunk);
      // Signs, then the chunk's sums (all values, the non-negative ones) and
      // the count of non-negative ones: loops that each run in vector lanes.
      const float* v = x.data();
      uint32_t* sign = signs.data();
      for (size_t i = begin; i < end; ++i) sign[i] = v[i] >= 0 ? 1u : 0u;
      double sum = 0, sum_pos = 0;
#pragma omp simd reduction(+ : sum, sum_pos)
      for (size_t i = begin; i < end; ++i) {
        const double d = v[i];
        sum += d;
        sum_pos += d >= 0 ? d : 0.0;
      }
      size_t npos = 0;
#pragma omp simd reduction(+ : npos)
      for (size_t i = begin; i < end; ++i) npos += sign[i];
      const size_t nneg = end - begin - npos;
      const float up = npos ? static_cast<float>(sum_pos / static_cast<double>(npos)) : 0.0f;
      const float down = nneg ? static_cast<float>((sum - sum_pos) / static_cast<double>(nneg)) : 0.0f;
      scales[2 * c] = up, scales[2 * c + 1] = down;
      if (o_.error_feedback) {  // x becomes what was not sent: the memory
        for (size_t i = begin; i < end; ++i) x[i] -= signs[i] ? up : down;
      }
    }
    w.put_all<float>(scales);
    pack_bits(signs, 1, w.grow(packed_bytes(n, 1)));
    if (o_.error_feedback) state.tensor("memory", n) = std::move(x);
  }

  void decode_add(std::span<const std::byte> message, std::span<const Matrix>, std::span<float> out) const override {
    Reader r(message, "onebit");
    const auto n = r.get<uint64_t>();
    const auto chunk = r.get<uint64_t>();
    if (n != out.size() || chunk == 0) fail<ValueError>("onebit message: {} values (expected {}), chunk {}", n, out.size(), chunk);
    const size_t chunks = chunk_count(n, chunk);
    std::vector<float> scales(2 * chunks);
    std::memcpy(scales.data(), r.take(scales.size() * sizeof(float)), scales.size() * sizeof(float));
    const std::byte* bits = r.take(packed_bytes(n, 1));
    r.expect_end();
    std::vector<uint32_t> signs(n);
    unpack_bits(bits, 1, signs);
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk, end = std::min<size_t>(n, begin + chunk);
      const float up = scales[2 * c], down = scales[2 * c + 1];
      for (size_t i = begin; i < end; ++i) out[i] += signs[i] ? up : down;
    }
  }

  size_t device_message_bytes(size_t n) const override {
    return onebit_message_bytes(n, static_cast<size_t>(o_.onebit_chunk));
  }
  void encode_on_device(DeviceCodecKernels& k, Device d, const float* grad, size_t n, BucketState& state,
                        std::byte* message) override {
    std::shared_ptr<std::byte> scratch;
    float* x = feedback_input(k, d, grad, n, state, o_.error_feedback, scratch);
    k.onebit_encode(d, x, n, static_cast<size_t>(o_.onebit_chunk), o_.error_feedback, message);
  }
  void decode_add_on_device(DeviceCodecKernels& k, Device d, const std::byte* message, size_t n,
                            float* out) const override {
    k.onebit_decode_add(d, message, n, static_cast<size_t>(o_.onebit_chunk), out);
  }
};

}  // namespace

std::unique_ptr<Codec> make_onebit_codec(const CodecOptions& options) { return std::make_unique<OneBit>(options); }

}  // namespace braid::comm::codec
