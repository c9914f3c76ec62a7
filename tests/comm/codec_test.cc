// Gradient codecs (braid/comm/codec/) over world sizes 1-5 on the in-process
// transport: every rank ends with bitwise the same average, close to the true
// one; error feedback conserves the signal; messages decode alone; QSGD is
// unbiased within its paper's variance bound (Monte Carlo).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "braid/base/rng.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/wire.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::codec {
namespace {

using comm::testing::run_world;

// A bucket of three tensors: a matrix worth compressing, a vector, a small matrix.
const std::vector<Matrix> kLayout = {{40, 30}, {30, 1}, {7, 3}};
size_t total(const std::vector<Matrix>& l) {
  size_t n = 0;
  for (const Matrix& m : l) n += m.size();
  return n;
}

std::vector<float> gradient(int rank, int step, size_t n) {
  Generator g(1000 + static_cast<uint64_t>(step), static_cast<uint64_t>(rank));
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(g.normal());
  return v;
}

CodecOptions options(const std::string& name) {
  CodecOptions o;
  o.name = name;
  o.topk_ratio = 0.1;
  o.onebit_chunk = 64;
  o.qsgd_levels = 15;
  o.qsgd_chunk = 128;
  o.powersgd_rank = 2;
  return o;
}

struct Case {
  std::string name;
  int world;
};

class Codecs : public ::testing::TestWithParam<Case> {};

// Three steps of every rank's gradients through the codec; each step every
// rank holds the same bytes, and with error feedback
//   sum over ranks of (grad + memory before) = W * average + sum of memory after.
TEST_P(Codecs, SameAverageEverywhereAndErrorFeedbackConserves) {
  const auto [name, p] = GetParam();
  const size_t n = total(kLayout);
  std::vector<std::vector<float>> results(p), before(p), after(p), inputs(p);
  std::vector<std::unique_ptr<Codec>> codecs(p);
  std::vector<BucketState> states(p);
  for (int r = 0; r < p; ++r) {
    codecs[r] = make_codec(options(name));
    states[r].stream = static_cast<uint64_t>(r);
  }
  for (int step = 0; step < 3; ++step) {
    run_world(p, [&](int r, Communicator& comm) {
      Codec* codec = codecs[r].get();
      BucketState& state = states[r];
      std::vector<float> g = gradient(r, step, n);
      inputs[r] = g;
      before[r] = state.tensors.count("memory") ? state.tensors["memory"] : std::vector<float>(n, 0.0f);
      CodecStats stats;
      codec->average(comm, g, kLayout, state, {.timeout = std::chrono::seconds(60)}, stats);
      EXPECT_EQ(stats.calls, 1);
      EXPECT_EQ(stats.raw_bytes, n * 4);
      EXPECT_LT(stats.wire_bytes, n * 4) << name << " must send fewer bytes than f32";
      results[r] = g;
      after[r] = state.tensors.count("memory") ? state.tensors["memory"] : std::vector<float>(n, 0.0f);
    });
    for (int r = 1; r < p; ++r) ASSERT_EQ(results[r], results[0]) << name << " rank " << r << " step " << step;
    double err = 0, norm = 0, drift = 0;
    for (size_t i = 0; i < n; ++i) {
      double mean = 0, in = 0, out = 0;
      for (int r = 0; r < p; ++r) {
        mean += inputs[r][i] / p;
        in += inputs[r][i] + before[r][i];
        out += after[r][i];
      }
      err += std::pow(results[0][i] - mean, 2);
      norm += mean * mean;
      drift = std::max(drift, std::fabs(in - (p * results[0][i] + out)));
    }
    const double rel = std::sqrt(err / norm);
    if (name == "fp16" || name == "bf16") {
      EXPECT_LT(rel, name == "fp16" ? 2e-3 : 1.5e-2) << name;
    } else if (name != "qsgd") {
      EXPECT_LT(drift, 1e-4) << name << ": error feedback lost part of the signal at step " << step;
    } else {
      EXPECT_LT(rel, 1.0) << "qsgd, 15 levels: a noisy but unbiased average";
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* name : {"fp16", "bf16", "qsgd", "onebit", "topk", "powersgd"})
    for (int p = 1; p <= 5; ++p) c.push_back({name, p});
  return c;
}
INSTANTIATE_TEST_SUITE_P(All, Codecs, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name + "_w" + std::to_string(info.param.world); });

// Warm-up and buckets too small to compress travel as plain all-reduces.
TEST(CodecWarmup, FirstStepsArePlainAllreduce) {
  run_world(3, [&](int r, Communicator& comm) {
    CodecOptions o = options("onebit");
    o.warmup_steps = 2;
    auto codec = make_codec(o);
    BucketState state;
    const size_t n = total(kLayout);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g = gradient(r, step, n);
      CodecStats stats;
      codec->average(comm, g, kLayout, state, {}, stats);
      EXPECT_EQ(stats.wire_bytes == stats.raw_bytes, step < 2) << "step " << step;
    }
  });
}

TEST(CodecMessages, DecodeAloneAndRefuseGarbage) {
  const size_t n = total(kLayout);
  const std::vector<float> g = gradient(0, 0, n);
  for (const char* name : {"fp16", "bf16", "qsgd", "onebit", "topk", "powersgd"}) {
    auto codec = make_codec(options(name));
    BucketState state;
    std::vector<std::byte> msg;
    codec->encode(g, kLayout, state, msg);
    EXPECT_LT(msg.size(), n * 4) << name;
    std::vector<float> out(n, 0.0f);
    codec->decode_add(msg, kLayout, out);
    if (state.tensors.count("memory")) {  // decoded + memory = what went in
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i] + state.tensors["memory"][i], g[i], 1e-5) << name;
    }
    std::vector<std::byte> cut(msg.begin(), msg.begin() + static_cast<ptrdiff_t>(msg.size() / 2));
    EXPECT_THROW(codec->decode_add(cut, kLayout, out), ValueError) << name;
  }
}

// A chunk length near 2^64 in a hostile message must not wrap the chunk
// count to zero (the decoder then read scales it never had).
TEST(CodecMessages, HugeChunkLengthsDoNotWrap) {
  const size_t n = 10;
  std::vector<float> out(n, 0.0f);
  auto onebit = make_codec(options("onebit"));
  std::vector<std::byte> msg;
  Writer w(msg);
  w.put<uint64_t>(n);
  w.put<uint64_t>(~uint64_t{0});   // one chunk of all 10 values
  w.put_all<float>(std::vector<float>{1.0f, -2.0f});
  std::vector<uint32_t> signs = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  pack_bits(signs, 1, w.grow(packed_bytes(n, 1)));
  onebit->decode_add(msg, flat_layout(n), out);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], i % 2 ? -2.0f : 1.0f) << i;
}

TEST(CodecMessages, PowerSgdRecoversALowRankMatrix) {
  CodecOptions o = options("powersgd");
  o.powersgd_rank = 2;
  auto codec = make_codec(o);
  const std::vector<Matrix> layout = {{20, 30}};
  std::vector<float> m(600);
  for (size_t i = 0; i < 20; ++i)
    for (size_t j = 0; j < 30; ++j) m[i * 30 + j] = std::sin(0.3f * i) * std::cos(0.2f * j) + 0.5f * (i % 3) * (j % 2);
  BucketState state;
  std::vector<std::byte> msg;
  codec->encode(m, layout, state, msg);
  EXPECT_EQ(msg.size(), 8 + (20 + 30) * 2 * 4u);
  std::vector<float> out(600, 0.0f);
  codec->decode_add(msg, layout, out);
  for (size_t i = 0; i < 600; ++i) ASSERT_NEAR(out[i], m[i], 1e-4) << i;
}

// Every width, lengths around a group of eight: the packed bits are the
// layout's (bit b of code i at bit i * width + b, LSB first, checked bit by
// bit), and the single and bulk unpackings return the codes.
TEST(CodecWire, BitFieldsRoundTrip) {
  for (int width = 1; width <= 25; ++width) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{101}}) {
      std::vector<uint32_t> codes(n);
      for (size_t i = 0; i < n; ++i) codes[i] = static_cast<uint32_t>((i * 2654435761u + 12345u) & ((1u << width) - 1));
      std::vector<std::byte> packed(packed_bytes(n, width));
      pack_bits(codes, width, packed.data());
      for (size_t i = 0; i < n; ++i)
        for (int b = 0; b < width; ++b) {
          const size_t bit = i * static_cast<size_t>(width) + static_cast<size_t>(b);
          ASSERT_EQ((std::to_integer<unsigned>(packed[bit / 8]) >> (bit % 8)) & 1u, (codes[i] >> b) & 1u)
              << "width " << width << " code " << i << " bit " << b;
        }
      std::vector<uint32_t> back(n);
      unpack_bits(packed.data(), width, back);
      EXPECT_EQ(back, codes) << "width " << width << ", " << n << " codes";
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(unpack_bits(packed.data(), i, width), codes[i]) << width;
    }
  }
}

// Top-k sends exactly the k largest magnitudes, whatever their signs, the
// ties among the k-th broken by index, never a zero; checked against sorting.
TEST(CodecMessages, TopKSendsTheLargestMagnitudes) {
  CodecOptions o = options("topk");
  o.error_feedback = false;
  auto codec = make_codec(o);
  const size_t n = 1000, k = 100;  // topk_ratio 0.1
  Generator g(5, 0);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> x(n);
    for (float& v : x) {
      v = static_cast<float>(g.normal());
      if (trial >= 1) v = std::round(v * 4) / 4;    // many ties, at the threshold too
      if (trial == 3) v = g.uniform() < 0.95f ? 0.0f : v;  // fewer non-zeros than k
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    std::vector<float> want(n, 0.0f);
    for (size_t j = 0; j < k; ++j) want[order[j]] = x[order[j]];
    BucketState state;
    std::vector<std::byte> msg;
    codec->encode(x, flat_layout(n), state, msg);
    std::vector<float> out(n, 0.0f);
    codec->decode_add(msg, flat_layout(n), out);
    EXPECT_EQ(out, want) << "trial " << trial;
  }
}

// A non-finite value spoils only its own chunk: that decodes as NaN or inf, and
// its code stays inside its field, so the next chunk (sharing a group of
// eight fields with it) decodes to levels of its own norm.
TEST(Qsgd, ANonFiniteValueSpoilsOnlyItsChunk) {
  CodecOptions o = options("qsgd");
  o.qsgd_chunk = 3;
  auto codec = make_codec(o);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> g = {1.0f, bad, -2.0f, 0.5f, -0.25f, 1.0f, 3.0f, -1.0f};
    BucketState state;
    std::vector<std::byte> msg;
    codec->encode(g, flat_layout(g.size()), state, msg);
    std::vector<float> out(g.size(), 0.0f);
    codec->decode_add(msg, flat_layout(g.size()), out);
    for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(std::isfinite(out[i])) << i;
    for (size_t c = 1; c * 3 < g.size(); ++c) {
      double sq = 0;
      for (size_t i = 3 * c; i < std::min(g.size(), 3 * c + 3); ++i) sq += g[i] * g[i];
      for (size_t i = 3 * c; i < std::min(g.size(), 3 * c + 3); ++i) {
        EXPECT_LE(std::fabs(out[i]), std::sqrt(sq) * (1 + 1e-6)) << i;
        EXPECT_TRUE(out[i] == 0 || (out[i] < 0) == (g[i] < 0)) << i;
      }
    }
  }
}

// Alistarh et al., Lemma 3.1: E[Q(v)] = v and E||Q(v) - v||^2 <= min(d/s^2, sqrt(d)/s) ||v||^2.
TEST(Qsgd, UnbiasedWithinTheVarianceBound) {
  const size_t d = 64;
  const int trials = 20000;
  for (int64_t s : {1, 4, 15}) {
    CodecOptions o = options("qsgd");
    o.qsgd_levels = s;
    o.qsgd_chunk = static_cast<int64_t>(d);
    auto codec = make_codec(o);
    const std::vector<float> v = gradient(3, 0, d);
    double vv = 0;
    for (float x : v) vv += x * x;
    std::vector<double> sum(d, 0.0), sum_sq(d, 0.0);
    double sq_err = 0;
    BucketState state;
    for (int t = 0; t < trials; ++t) {
      std::vector<std::byte> msg;
      codec->encode(v, flat_layout(d), state, msg);
      state.steps++;  // a fresh draw per trial, as per step
      std::vector<float> q(d, 0.0f);
      codec->decode_add(msg, flat_layout(d), q);
      for (size_t i = 0; i < d; ++i) {
        sum[i] += q[i];
        sum_sq[i] += std::pow(q[i] - v[i], 2);
        sq_err += std::pow(q[i] - v[i], 2);
      }
    }
    const double var = sq_err / trials;
    const double bound = std::min(d / double(s * s), std::sqrt(double(d)) / s) * vv;
    EXPECT_LE(var, bound) << "s = " << s;
    // Each coordinate's mean within 5 of its standard errors.
    for (size_t i = 0; i < d; ++i) {
      const double se = std::sqrt(sum_sq[i] / trials / trials) + 1e-7;
      ASSERT_NEAR(sum[i] / trials, v[i], 5 * se) << "s = " << s << " coordinate " << i;
    }
  }
}

TEST(CodecOptionsTest, RefusesBadSettings) {
  CodecOptions o = options("topk");
  o.topk_ratio = 0;
  EXPECT_THROW(make_codec(o), ConfigError);
  o = options("nope");
  EXPECT_THROW(make_codec(o), ConfigError);
  EXPECT_EQ(make_codec(options("none")), nullptr);
  const CodecOptions back = CodecOptions::from_json(options("qsgd").to_json());
  EXPECT_EQ(back.to_json(), options("qsgd").to_json());
}

}  // namespace
}  // namespace braid::comm::codec
