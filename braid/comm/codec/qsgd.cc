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
    // A fresh stream per (rank and bucket, call): rounding never repeats a draw.
    Generator gen(o_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(state.steps + 1)), state.stream);
    std::vector<float> norms(chunks);
    std::vector<uint32_t> codes(n);
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk, end = std::min(n, begin + chunk);
      double sq = 0;
      for (size_t i = begin; i < end; ++i) sq += static_cast<double>(grad[i]) * grad[i];
      const float norm = static_cast<float>(std::sqrt(sq));
      norms[c] = norm;
      for (size_t i = begin; i < end; ++i) {
        uint32_t level = 0;
        if (norm > 0) {
          const double l = std::fabs(static_cast<double>(grad[i])) / norm * s;
          const double floor = std::floor(l);
          level = static_cast<uint32_t>(floor) + (gen.uniform_f64() < l - floor ? 1u : 0u);
          level = std::min(level, s);  // l <= s up to rounding of the norm
        }
        codes[i] = (level << 1) | (grad[i] < 0 ? 1u : 0u);
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
    const auto* norms = reinterpret_cast<const float*>(r.take(chunks * sizeof(float)));
    const int width = 1 + level_bits(s);
    const std::byte* bits = r.take(packed_bytes(n, width));
    r.expect_end();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t code = unpack_bits(bits, i, width);
      float norm;
      std::memcpy(&norm, norms + i / chunk, sizeof(float));  // the message need not be aligned
      const float v = norm * static_cast<float>(code >> 1) / static_cast<float>(s);
      out[i] += (code & 1u) ? -v : v;
    }
  }
};

}  // namespace

std::unique_ptr<Codec> make_qsgd_codec(const CodecOptions& options) { return std::make_unique<Qsgd>(options); }

}  // namespace braid::comm::codec
