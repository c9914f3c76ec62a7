// scaled_dot_product_attention (braid/ops/attention.h): values and gradients
// against PyTorch's composed attention, softmax(q k^T * scale + mask) v with
// repeat_interleave for grouped heads (Debian's torch 1.13 has no
// F.scaled_dot_product_attention), over causal and full masks, grouped heads,
// fewer queries than keys, lengths around the kernels' 64-row blocks, head
// dims that are and are not whole vectors, and slices of a packed qkv tensor;
// finite differences in f64; the dropout mask in the forward and the backward;
// memory on a long context; refusals.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/attention.h"
#include "braid/ops/dropout.h"
#include "braid/ops/registry.h"
#include "braid/tensor/cpu/attention.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

struct Geometry {
  int64_t b, tq, tk, hq, hkv, d;
  bool causal = true;
  bool packed = false;  // q, k, v are slices of one [B, T, (Hq + 2 Hkv) D] tensor (needs tq == tk)
  double scale = 0;
};

std::string describe(const Geometry& g) {
  return fmt::format("B={} Tq={} Tk={} Hq={} Hkv={} D={}{}{}", g.b, g.tq, g.tk, g.hq, g.hkv, g.d,
                     g.causal ? " causal" : "", g.packed ? " packed" : "");
}

double scale_of(const Geometry& g) { return g.scale != 0 ? g.scale : 1 / std::sqrt(static_cast<double>(g.d)); }

// q, k, v of the geometry: fresh tensors, or views into one packed projection.
std::vector<Tensor> make_qkv(const Geometry& g, DType dtype, Generator& gen, double range = 2) {
  if (!g.packed) {
    return {random_tensor({g.b, g.tq, g.hq, g.d}, dtype, gen, -range, range),
            random_tensor({g.b, g.tk, g.hkv, g.d}, dtype, gen, -range, range),
            random_tensor({g.b, g.tk, g.hkv, g.d}, dtype, gen, -range, range)};
  }
  const int64_t w = (g.hq + 2 * g.hkv) * g.d;
  const Tensor qkv = random_tensor({g.b, g.tq, w}, dtype, gen, -range, range);
  const Shape strides{g.tq * w, w, g.d, 1};
  return {qkv.as_strided({g.b, g.tq, g.hq, g.d}, strides, 0),
          qkv.as_strided({g.b, g.tq, g.hkv, g.d}, strides, g.hq * g.d),
          qkv.as_strided({g.b, g.tq, g.hkv, g.d}, strides, (g.hq + g.hkv) * g.d)};
}

// PyTorch's attention from primitives over inputs q, k, v (and `mask`, the
// dropout factors [B, Hq, Tq, Tk], when dropout).
std::string reference(const Geometry& g, bool dropout = false) {
  const std::string mask = g.causal ? fmt::format("torch.full(({}, {}), -math.inf, dtype=q.dtype).triu({})", g.tq,
                                                  g.tk, g.tk - g.tq + 1)
                                    : "0";
  return fmt::format(
      "(lambda Q, K, V: (torch.softmax(Q.permute(0, 2, 1, 3) @ K.permute(0, 2, 1, 3).repeat_interleave({0}, 1)"
      ".transpose(-1, -2) * {1:.17g} + {2}, -1){3} @ V.permute(0, 2, 1, 3).repeat_interleave({0}, 1))"
      ".permute(0, 2, 1, 3))(q, k, v)",
      g.hq / g.hkv, scale_of(g), mask, dropout ? " * mask" : "");
}

OpCheck check_of(const Geometry& g, Generator& gen) {
  const std::vector<Tensor> qkv = make_qkv(g, DType::f32, gen);
  const SdpaOptions o{.causal = g.causal, .scale = g.scale};
  return {reference(g),
          {{"q", qkv[0]}, {"k", qkv[1]}, {"v", qkv[2]}},
          [o](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], o); },
          {"q", "k", "v"},
          1e-4,
          1e-4};
}

TEST(Attention, MatchesTorchValuesAndGradients) {
  BRAID_REQUIRE_TORCH();
  Generator gen(101);
  const std::vector<Geometry> geometries = {
      {.b = 2, .tq = 7, .tk = 7, .hq = 4, .hkv = 4, .d = 16},
      {.b = 2, .tq = 7, .tk = 7, .hq = 4, .hkv = 4, .d = 16, .causal = false},
      {.b = 1, .tq = 1, .tk = 1, .hq = 2, .hkv = 1, .d = 16},
      {.b = 1, .tq = 65, .tk = 65, .hq = 4, .hkv = 2, .d = 64},              // grouped, 2 per group
      {.b = 2, .tq = 130, .tk = 130, .hq = 4, .hkv = 1, .d = 16},            // one key-value head
      {.b = 1, .tq = 130, .tk = 130, .hq = 2, .hkv = 2, .d = 80, .causal = false},
      {.b = 2, .tq = 1, .tk = 130, .hq = 4, .hkv = 2, .d = 64},              // a decoding step
      {.b = 1, .tq = 7, .tk = 65, .hq = 4, .hkv = 2, .d = 16},               // chunked prefill
      {.b = 1, .tq = 65, .tk = 130, .hq = 2, .hkv = 1, .d = 64},
      {.b = 1, .tq = 130, .tk = 7, .hq = 2, .hkv = 2, .d = 16, .causal = false},
      {.b = 2, .tq = 65, .tk = 65, .hq = 4, .hkv = 2, .d = 16, .packed = true},
      {.b = 1, .tq = 130, .tk = 130, .hq = 2, .hkv = 1, .d = 80, .packed = true},
      {.b = 1, .tq = 7, .tk = 7, .hq = 3, .hkv = 3, .d = 5, .scale = 0.3},    // head dim not a whole vector
  };
  std::vector<OpCheck> checks;
  for (const Geometry& g : geometries) checks.push_back(check_of(g, gen));
  expect_matches_torch(checks);
}

TEST(Attention, FiniteDifferenceGradientsInF64) {
  Generator gen(102);
  const std::vector<Geometry> geometries = {
      {.b = 2, .tq = 5, .tk = 5, .hq = 4, .hkv = 2, .d = 3},
      {.b = 1, .tq = 3, .tk = 6, .hq = 2, .hkv = 1, .d = 4},
      {.b = 1, .tq = 6, .tk = 3, .hq = 2, .hkv = 2, .d = 4, .causal = false},
      {.b = 1, .tq = 67, .tk = 67, .hq = 2, .hkv = 1, .d = 3, .packed = true},  // across a block edge
  };
  for (const Geometry& g : geometries) {
    std::vector<Tensor> in = make_qkv(g, DType::f64, gen, 1);
    for (Tensor& t : in) t = leaf(t.detach());
    for (double p : {0.0, 0.4}) {
      // A fresh generator per call: every evaluation draws the same mask.
      const Fn fn = [&g, p](const std::vector<Tensor>& x) {
        Generator drops(5, 2);
        return scaled_dot_product_attention(x[0], x[1], x[2],
                                            {.causal = g.causal, .scale = g.scale, .dropout = p, .generator = &drops});
      };
      expect_gradcheck(fn, in, (describe(g) + fmt::format(" dropout {}", p)).c_str());
    }
  }
}

// The mask the op applies, recovered from its state output, makes PyTorch's
// composed attention equal braid's in value and in every gradient: forward and
// backward drop the same elements.
TEST(Attention, DropoutMaskIsTheSameInForwardAndBackward) {
  BRAID_REQUIRE_TORCH();
  Generator gen(103);
  std::vector<OpCheck> checks;
  for (const Geometry& g : {Geometry{.b = 2, .tq = 70, .tk = 70, .hq = 4, .hkv = 2, .d = 16},
                            Geometry{.b = 1, .tq = 65, .tk = 65, .hq = 2, .hkv = 2, .d = 16},  // a lone last row
                            Geometry{.b = 1, .tq = 9, .tk = 130, .hq = 2, .hkv = 1, .d = 64, .causal = false}}) {
    const double p = 0.25;
    Generator drops(17, 4);
    drops.next_u32();  // an offset that is not a whole Philox block
    const Generator::State st = drops.state();
    const std::vector<Tensor> qkv = make_qkv(g, DType::f32, gen);
    const op::Attrs attrs{{"causal", int64_t{g.causal}},
                          {"scale", scale_of(g)},
                          {"dropout", p},
                          {"generator", dropout_generator_attr(&drops)}};
    const std::vector<Tensor> out = op::call(op::find("scaled_dot_product_attention"), qkv, attrs);
    const std::vector<int64_t> rng = out[2].to_vector<int64_t>();
    EXPECT_EQ(rng, (std::vector<int64_t>{17, 4, 1}));
    const uint64_t words = cpu::attention_dropout_words(g.b, g.hq, g.tq, g.tk);
    EXPECT_EQ(drops.state().offset, 1 + words) << "the generator moves past every word reserved";
    const Tensor mask = cpu::attention_dropout_mask(
        g.b, g.hq, g.tq, g.tk, DType::f32, {.dropout = p, .seed = 17, .stream = 4, .first_word = 1});
    checks.push_back({reference(g, true),
                      {{"q", qkv[0]}, {"k", qkv[1]}, {"v", qkv[2]}, {"mask", mask}},
                      [g, p, st](const std::vector<Tensor>& in) {
                        Generator replay(17, 4);
                        replay.set_state(st);
                        return scaled_dot_product_attention(
                            in[0], in[1], in[2], {.causal = g.causal, .dropout = p, .generator = &replay});
                      },
                      {"q", "k", "v"},
                      1e-4,
                      1e-4});
  }
  expect_matches_torch(checks);
}

TEST(Attention, DropoutKeepsAboutOneMinusPAndPZeroIsNoDropout) {
  const cpu::AttentionParams p{.dropout = 0.1, .seed = 9, .stream = 1, .first_word = 5};
  const Tensor mask = cpu::attention_dropout_mask(1, 4, 256, 256, DType::f32, p);
  int64_t kept = 0;
  for (float m : mask.to_vector<float>()) {
    if (m != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(m, 1 / 0.9f);
    }
  }
  // Binomial(262144, 0.9): sd = 154, 5 sd = 770.
  EXPECT_NEAR(static_cast<double>(kept), 0.9 * 262144, 770);

  // The documented counter of element (b, h, i, j): tile t of 64 x 64, index
  // e = (j % 64) * 64 + i % 64 in it, 16 bits (e % 2) of word t * 2048 + e / 2.
  const cpu::AttentionParams half{.dropout = 0.5, .seed = 21, .stream = 6, .first_word = 3};
  const int64_t tq = 70, tk = 130;
  const std::vector<float> m = cpu::attention_dropout_mask(2, 3, tq, tk, DType::f32, half).to_vector<float>();
  for (const auto& [b, h, i, j] : std::vector<std::array<int64_t, 4>>{
           {0, 0, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {0, 0, 65, 3}, {0, 0, 2, 64}, {1, 2, 69, 129}, {1, 1, 64, 128}}) {
    const int64_t t = ((b * 3 + h) * 2 + i / 64) * 3 + j / 64, e = (j % 64) * 64 + i % 64;
    Generator words(21, 6);
    words.set_state({21, 6, static_cast<uint64_t>(3 + t * 2048 + e / 2)});
    const uint32_t word = words.next_u32();
    const uint32_t bits = e % 2 ? word >> 16 : word & 0xffffu;
    EXPECT_EQ(m[static_cast<size_t>(((b * 3 + h) * tq + i) * tk + j)], bits >= 32768 ? 2.0f : 0.0f)
        << b << " " << h << " " << i << " " << j;
  }

  Generator gen(104);
  const Geometry g{.b = 2, .tq = 70, .tk = 70, .hq = 2, .hkv = 2, .d = 16};
  const std::vector<Tensor> x = make_qkv(g, DType::f32, gen);
  Generator drops(3, 3);
  const Tensor plain = scaled_dot_product_attention(x[0], x[1], x[2]);
  const Tensor p0 = scaled_dot_product_attention(x[0], x[1], x[2], {.dropout = 0, .generator = &drops});
  EXPECT_TRUE(all_close(p0, plain, 0, 0));
  EXPECT_EQ(drops.state().offset, 0u) << "p = 0 draws nothing";
  const Tensor a = scaled_dot_product_attention(x[0], x[1], x[2], {.dropout = 0.5, .generator = &drops});
  const Tensor b = scaled_dot_product_attention(x[0], x[1], x[2], {.dropout = 0.5, .generator = &drops});
  EXPECT_FALSE(all_close(a, b, 1e-3, 1e-3)) << "each call draws a new mask";
  const Tensor all = scaled_dot_product_attention(x[0], x[1], x[2], {.dropout = 1, .generator = &drops});
  EXPECT_TRUE(all_close(all, Tensor::zeros(all.shape()), 0, 0));
}

// Each element is computed by one fixed sequence of operations: the thread
// count changes nothing, not even the last bit, with grouped heads and dropout.
TEST(Attention, SameBitsOnOneAndTwoThreads) {
  Generator gen(105);
  const Geometry g{.b = 2, .tq = 130, .tk = 130, .hq = 4, .hkv = 2, .d = 64, .packed = true};
  const std::vector<Tensor> x = make_qkv(g, DType::f32, gen);
  const Tensor r = random_tensor({g.b, g.tq, g.hq, g.d}, DType::f32, gen);
  std::vector<std::vector<Tensor>> runs;
  for (int threads : {1, 2}) {
    ThreadsScope scope(threads);
    std::vector<Tensor> in;
    for (const Tensor& t : x) in.push_back(leaf(t.detach()));
    Generator drops(8, 0);
    const Tensor out = scaled_dot_product_attention(in[0], in[1], in[2], {.dropout = 0.1, .generator = &drops});
    autograd::backward(out, r);
    runs.push_back({out, in[0].grad(), in[1].grad(), in[2].grad()});
  }
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(all_close(runs[0][i], runs[1][i], 0, 0)) << "output " << i;
}

// T = 4096: the scores alone would be 64 MiB; forward and backward together
// stay within a few MiB beside the outputs and gradients.
TEST(Attention, LongContextRunsWithoutTheScoreMatrix) {
  const int64_t t = 4096, d = 64;
  Generator gen(106);
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) in.push_back(leaf(random_tensor({1, t, 1, d}, DType::f32, gen)));
  const Tensor r = random_tensor({1, t, 1, d}, DType::f32, gen);
  CachingAllocator& alloc = CachingAllocator::host();
  const size_t before = alloc.stats().bytes_in_use;
  alloc.reset_peak();
  Tensor out = scaled_dot_product_attention(in[0], in[1], in[2]);
  autograd::backward(out, r);
  const size_t peak = alloc.stats().peak_bytes_in_use - before;
  const size_t scores = static_cast<size_t>(t * t) * sizeof(float);
  // Measured 10.5 MB: out, dq, dk and dv (1 MiB each) and the backward's
  // scratch (Q and dO packed both ways and dQ: 5 MiB); the composed path holds
  // the scores and the weights, 64 MiB each, before its backward starts.
  EXPECT_LT(peak, scores / 4) << "peak " << peak << " bytes";
  // Row 0 sees key 0 only; the last row sees every key (checked in double).
  const std::vector<float> q = in[0].to_vector<float>(), k = in[1].to_vector<float>(), v = in[2].to_vector<float>();
  const std::vector<float> o = out.to_vector<float>();
  for (int64_t e = 0; e < d; ++e) EXPECT_NEAR(o[e], v[e], 1e-6);
  std::vector<double> s(t);
  double mx = -INFINITY, z = 0;
  for (int64_t j = 0; j < t; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[(t - 1) * d + e]) * k[j * d + e];
    s[j] = dot / 8;
    mx = std::max(mx, s[j]);
  }
  for (double& x : s) z += (x = std::exp(x - mx));
  for (int64_t e = 0; e < d; ++e) {
    double acc = 0;
    for (int64_t j = 0; j < t; ++j) acc += s[j] / z * v[j * d + e];
    EXPECT_NEAR(o[(t - 1) * d + e], acc, 1e-5);
  }
}

TEST(Attention, MetaDeviceGivesTheShapes) {
  const Tensor q = Tensor::empty({2, 5, 6, 16}, DType::f32, Device::meta);
  const Tensor kv = Tensor::empty({2, 9, 3, 16}, DType::f32, Device::meta);
  const std::vector<Tensor> out = op::call(
      op::find("scaled_dot_product_attention"), {q, kv, kv},
      {{"causal", int64_t{1}}, {"scale", 0.25}, {"dropout", 0.0}, {"generator", int64_t{0}}});
  EXPECT_TRUE(out[0].is_meta());
  EXPECT_EQ(out[0].shape(), (Shape{2, 5, 6, 16}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 6, 5}));
  EXPECT_EQ(out[2].shape(), (Shape{3}));
  EXPECT_EQ(out[2].dtype(), DType::i64);
}

void expect_refused(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o, const std::string& says) {
  try {
    scaled_dot_product_attention(q, k, v, o);
    ADD_FAILURE() << "accepted q " << to_string(q.shape()) << " k " << to_string(k.shape());
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(says), std::string::npos) << what;
    EXPECT_NE(what.find(to_string(q.shape())), std::string::npos) << what;
    if (says.find("dropout") == std::string::npos) {
      EXPECT_NE(what.find(to_string(k.shape())), std::string::npos) << what;
    }
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

TEST(Attention, RefusesBadShapesAndDtypes) {
  auto t = [](const Shape& s, DType d = DType::f32) { return Tensor::zeros(s, d); };
  const Tensor q = t({2, 5, 4, 8}), kv = t({2, 5, 2, 8});
  expect_refused(q, t({2, 5, 3, 8}), t({2, 5, 3, 8}), {}, "not a multiple");
  expect_refused(q, t({2, 5, 2, 7}), t({2, 5, 2, 7}), {}, "head dims differ");
  expect_refused(q, t({3, 5, 2, 8}), t({3, 5, 2, 8}), {}, "batch sizes differ");
  expect_refused(q, kv, t({2, 6, 2, 8}), {}, "k and v");
  expect_refused(t({2, 5, 32}), t({2, 5, 16}), t({2, 5, 16}), {}, "[batch, time, heads, head dim]");
  expect_refused(q, kv, t({2, 5, 2, 8}, DType::f64), {}, "dtypes differ");
  expect_refused(t({2, 5, 4, 8}, DType::bf16), t({2, 5, 2, 8}, DType::bf16), t({2, 5, 2, 8}, DType::bf16), {},
                 "not supported");
  expect_refused(t({2, 6, 4, 8}), kv, kv, {}, "more queries");
  expect_refused(q, kv, kv, {.dropout = 1.5}, "dropout");
  EXPECT_NO_THROW(scaled_dot_product_attention(t({2, 6, 4, 8}), kv, kv, {.causal = false}));
}

}  // namespace
}  // namespace braid::testing
