// QSGD (Alistarh et al., NeurIPS 2017): stochastic quantisation to s levels.
//
// Per chunk v of d values (codec.qsgd_chunk), with l_i = |v_i| / ||v||_2 * s
// rounded down or up at random so that E[round(l_i)] = l_i:
//   Q(v)_i = ||v|| * sign(v_i) * round(l_i) / s
// which is unbiased, E[Q(v)] = v, with variance (the paper's Lemma 3.1)
//   E ||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2.
// Unbiased, so it needs no error feedback. Message: n, s, chunk, one f32 norm
// per chunk, then fixed-width fields of 1 + ceil(log2(s + 1)) bits (sign,
// level): with s = 127, 8 bits a value, about 4x fewer bytes than f32. (Elias
// coding of the levels would shrink small s further; fixed width keeps
// decoding a shift and a mask.)
#include <bit>
#include <cmath>

#include "braid/base/rng.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/device.h"
#include "braid/comm/codec/wire.h"

namespace braid::comm::codec {
namespace {

int level_bits(uint32_t s) { return std::bit_width(s); }  // levels 0..s

class Qsgd final : public Codec {
 public:
  using Codec::Codec;

  void encode(std::span<const float> grad, std::span<const Matrix>, BucketState& state,
              std::vector<std::byte>& message) override {
    const auto s = static_cast<uint32_t>(o_.qsgd_levels);
    const auto chunk = static_cast<size_t>(o_.qsgd_chunk);
    const int width = 1 + level_bits(s);
    const size_t n = grad.size(), chunks = chunk_count(n, chunk);
    message.clear();
    Writer w(message);
    w.put<uint64_t>(n);
    w.put<uint32_t>(s);
    w.put<uint32_t>(static_cast<uint32_t>(chunk));
    // One random word per value, from a fresh stream per (rank and bucket,
    // call): rounding never repeats a draw. The words become the codes.
    std::vector<uint32_t> codes(n);
    philox_fill(key(state), state.stream, 0, codes);
    std::vector<float> norms(chunks);
    const auto top = static_cast<double>(s);
    const float* g = grad.data();
    uint32_t* code = codes.data();
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk, end = std::min(n, begin + chunk);
      const float norm = norm2(grad.subspan(begin, end - begin));
      norms[c] = norm;
      // l = |v_i| / ||v|| * s, rounded up with probability l - floor(l): the
      // word's top 24 bits as a uniform in [0, 1), as Generator::uniform().
      // s / ||v|| in double stays finite for a denormal norm.
      const double scale = norm > 0 ? static_cast<double>(s) / norm : 0.0;
      // In doubles and branch-free, so it runs in vector lanes; floor(l) as
      // a truncation (l >= 0), which vectorises where std::floor does not.
      for (size_t i = begin; i < end; ++i) {
        // At most s: l exceeds it only by the norm's rounding, and a NaN
        // value (its chunk decodes as non-finite anyway: its norm is) becomes s,
        // so the conversion below is always defined.
        const double raw = std::fabs(static_cast<double>(g[i])) * scale;
        const double l = raw < top ? raw : top;
        const auto floor = static_cast<int32_t>(l);
        const double u = static_cast<double>(static_cast<int32_t>(code[i] >> 8)) * 0x1.0p-24;
        const int32_t level = floor + (u < l - floor ? 1 : 0);
        code[i] = (static_cast<uint32_t>(level) << 1) | (g[i] < 0 ? 1u : 0u);
      }
    }
    w.put_all<float>(norms);
    pack_bits(codes, width, w.grow(packed_bytes(n, width)));
  }

  void decode_add(std::span<const std::byte> message, std::span<const Matrix>, std::span<float> out) const override {
    Reader r(message, "qsgd");
    const auto n = r.get<uint64_t>();
    const auto s = r.get<uint32_t>();
    const auto chunk = r.get<uint32_t>();
    if (n != out.size() || s == 0 || s > (1u << 24) || chunk == 0)
      fail<ValueError>("qsgd message: {} values (expected {}), s = {}, chunk = {}", n, out.size(), s, chunk);
    const size_t chunks = chunk_count(n, chunk);
    const std::byte* norms = r.take(chunks * sizeof(float));
    const int width = 1 + level_bits(s);
    const std::byte* bits = r.take(packed_bytes(n, width));
    r.expect_end();
    std::vector<uint32_t> codes(n);
    unpack_bits(bits, width, codes);
    for (size_t c = 0; c < chunks; ++c) {
      float norm;
      std::memcpy(&norm, norms + c * sizeof(float), sizeof(float));  // the message need not be aligned
      const size_t begin = c * chunk, end = std::min<size_t>(n, begin + chunk);
      for (size_t i = begin; i < end; ++i) {
        const float v = norm * static_cast<float>(codes[i] >> 1) / static_cast<float>(s);
        out[i] += (codes[i] & 1u) ? -v : v;
      }
    }
  }

  size_t device_message_bytes(size_t n) const override {
    return qsgd_message_bytes(n, static_cast<uint32_t>(o_.qsgd_levels), static_cast<size_t>(o_.qsgd_chunk));
  }
  // The same Philox words as encode(), so the same message bit for bit.
  void encode_on_device(DeviceCodecKernels& k, Device d, const float* grad, size_t n, BucketState& state,
                        std::byte* message) override {
    k.qsgd_encode(d, grad, n, static_cast<uint32_t>(o_.qsgd_levels), static_cast<size_t>(o_.qsgd_chunk),
                  {.key = key(state), .stream = state.stream}, message);
  }
  void decode_add_on_device(DeviceCodecKernels& k, Device d, const std::byte* message, size_t n,
                            float* out) const override {
    k.qsgd_decode_add(d, message, n, static_cast<uint32_t>(o_.qsgd_levels), static_cast<size_t>(o_.qsgd_chunk), out);
  }

 private:
  // The Philox key of a call: a fresh stream of words per (rank and bucket, call).
  uint64_t key(const BucketState& state) const {
    return o_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(state.steps + 1));
  }
  // ||v||_2, summed in double (without the f32 round-off of a long sum), as
  // a reduction the compiler may split over vector lanes.
  static float norm2(std::span<const float> v) {
    double sq = 0;
#pragma omp simd reduction(+ : sq)
    for (size_t i = 0; i < v.size(); ++i) sq += static_cast<double>(v[i]) * v[i];
    return static_cast<float>(std::sqrt(sq));
  }
};

}  // namespace

std::unique_ptr<Codec> make_qsgd_codec(const CodecOptions& options) { return std::make_unique<Qsgd>(options); }

}  // namespace braid::comm::codec
