// bf16 kernels, raw: the vectorised casts against the scalar bf16 type and
// hand-worked roundings; the bf16 GEMM and convolutions against f64 and f32
// products over the same (bf16-exact) values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/rng.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/tensor/cpu/cast.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/cpu/gemm.h"
#include "braid/tensor/cpu/onednn.h"
#include "braid/tensor/tensor.h"

namespace braid {
namespace {

uint16_t bits_of(bf16 v) { return v.bits; }
float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16Cast, HandWorkedRoundings) {
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3f80},
      {1.0f + 0x1p-8f, 0x3f80},              // half an ulp, tie: stays on the even 1.0
      {1.0f + 0x1p-7f + 0x1p-8f, 0x3f82},    // tie between 1+2^-7 (odd) and 1+2^-6 (even)
      {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},   // just above half: up
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::infinity(), 0x7f80},
      {std::numeric_limits<float>::max(), 0x7f80},  // rounds past the largest bf16
      {1e-39f, 0x000b},                       // subnormal kept, not flushed
      {float_of_bits(0x7f800001u), 0x7fc0},   // signalling NaN comes back quiet
      {float_of_bits(0xffc12345u), 0xffc1},   // NaN keeps its sign and top payload
  };
  // Whole vectors of 16 (the kernel's unit) and a tail; the subnormal case
  // (index 7) only in the second vector, so the first one takes the fast
  // path with NaNs, infinities and ties in it.
  const std::vector<size_t> no_subnormal = {0, 1, 2, 3, 4, 5, 6, 8, 9};
  std::vector<size_t> which;
  for (size_t i = 0; i < 16; ++i) which.push_back(no_subnormal[i % no_subnormal.size()]);
  for (size_t i = 0; i < 16 + 5; ++i) which.push_back(i % cases.size());
  std::vector<float> in;
  for (size_t k : which) in.push_back(cases[k].first);
  std::vector<bf16> out(in.size());
  cpu::cast_f32_to_bf16(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < which.size(); ++i) {
    EXPECT_EQ(bits_of(out[i]), cases[which[i]].second) << "element " << i << ", case " << which[i];
  }
  for (const auto& c : cases) EXPECT_EQ(bits_of(bf16(c.first)), c.second) << "scalar type, " << c.first;
}

TEST(Bf16Cast, VectorisedMatchesScalarTypeOnRandomBitsAndEveryBf16) {
  // Random bit patterns cover every class (normal, subnormal, inf, NaN); an
  // odd length past several pool chunks checks the split and the tail.
  const int64_t n = 3 * 32768 + 17;
  Generator gen(3);
  std::vector<float> in(static_cast<size_t>(n));
  for (auto& v : in) v = float_of_bits(static_cast<uint32_t>(gen.next_u64()));
  std::vector<bf16> out(in.size());
  cpu::cast_f32_to_bf16(in.data(), out.data(), n);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) mismatches += bits_of(out[i]) != bits_of(bf16(in[i]));
  EXPECT_EQ(mismatches, 0);

  // Widening is exact: all 65536 patterns.
  std::vector<bf16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b].bits = static_cast<uint16_t>(b);
  std::vector<float> wide(all.size());
  cpu::cast_bf16_to_f32(all.data(), wide.data(), 65536);
  for (uint32_t b = 0; b < 65536; ++b) {
    uint32_t u;
    std::memcpy(&u, &wide[b], 4);
    ASSERT_EQ(u, b << 16) << b;
  }
}

TEST(Bf16Cast, TensorToUsesTheSameRoundingForContiguousAndStridedSources) {
  Generator gen(4);
  Tensor t = Tensor::empty({37, 53});
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(gen.normal() * 3.0);
  const Tensor fast = t.to(DType::bf16);                                   // contiguous: the kernel
  const Tensor slow = t.as_strided({53, 37}, {1, 53}, 0).to(DType::bf16);  // transposed view: the strided loop
  for (int64_t r = 0; r < 37; ++r) {
    for (int64_t c = 0; c < 53; ++c) {
      ASSERT_EQ(fast.data<bf16>()[r * 53 + c].bits, slow.data<bf16>()[c * 37 + r].bits);
      ASSERT_EQ(fast.data<bf16>()[r * 53 + c].bits, bf16(p[r * 53 + c]).bits);
    }
  }
  const Tensor back = fast.to(DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_EQ(back.data<float>()[i], static_cast<float>(bf16(p[i])));
  }
}

// tensor.bf16_without_onednn_bf16 runs this file under ONEDNN_MAX_CPU_ISA=AVX2.
TEST(Bf16Gemm, OnednnBf16KernelsFollowTheCpuAndTheIsaCap) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap != nullptr && std::string(cap) == "AVX2") {
    EXPECT_FALSE(cpu::onednn::has_bf16());
  } else if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_TRUE(cpu::onednn::has_bf16());
  }
}

// Values that bf16 holds exactly, so f64 products over them are the exact reference.
std::vector<bf16> random_bf16(int64_t n, Generator& gen) {
  std::vector<bf16> v(static_cast<size_t>(n));
  for (auto& x : v) x = bf16(static_cast<float>(gen.uniform() * 2 - 1));
  return v;
}

TEST(Bf16Gemm, EveryLayoutAlphaBetaAgainstF64) {
  Generator gen(5);
  struct Shape3 { int64_t m, n, k; };
  for (const Shape3 s : {Shape3{7, 5, 3}, Shape3{64, 256, 784}, Shape3{1, 9, 40}, Shape3{33, 1, 17}}) {
    for (int layout = 0; layout < 4; ++layout) {
      for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, {0.5f, 1.f}, {1.f, 0.25f}}) {
        const bool ta = layout & 1, tb = layout & 2;
        // Stored matrices with a padded row stride (ld > columns).
        const int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k, lda = a_cols + 3;
        const int64_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n, ldb = b_cols + 1;
        const int64_t ldc = s.n + 2;
        const auto a = random_bf16(a_rows * lda, gen), b = random_bf16(b_rows * ldb, gen);
        std::vector<float> c(static_cast<size_t>(s.m * ldc));
        for (auto& x : c) x = static_cast<float>(gen.uniform());
        std::vector<float> c0 = c;
        cpu::gemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        double worst = 0;
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < s.k; ++p) {
              const double av = static_cast<float>(ta ? a[p * lda + i] : a[i * lda + p]);
              const double bv = static_cast<float>(tb ? b[j * ldb + p] : b[p * ldb + j]);
              sum += av * bv;
              mag += std::abs(av * bv);
            }
            const double want = alpha * sum + beta * c0[i * ldc + j];
            // f32 accumulation: a few ulps of the magnitude summed.
            worst = std::max(worst, std::abs(c[i * ldc + j] - want) / (1e-30 + mag + std::abs(want)));
          }
          for (int64_t j = s.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]) << "wrote past n";
        }
        EXPECT_LT(worst, 1e-5) << s.m << "x" << s.n << "x" << s.k << " ta=" << ta << " tb=" << tb
                               << " alpha=" << alpha << " beta=" << beta;
      }
    }
  }
}

TEST(Bf16Gemm, EmptyInnerDimensionScalesCAndBadArgumentsThrow) {
  std::vector<float> c = {1, 2, 3, 4};
  const bf16 dummy[1];
  cpu::gemm(false, false, 2, 2, 0, 1.f, dummy, 1, dummy, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2}));
  EXPECT_THROW(cpu::gemm(false, false, 2, 2, 3, 1.f, dummy, 2, dummy, 2, 0.f, c.data(), 2), ValueError);
}

// Fashion-MNIST CNN shapes and a grouped, strided, dilated, padded one.
std::vector<cpu::Conv2dGeometry> conv_geometries() {
  std::vector<cpu::Conv2dGeometry> g(3);
  g[0] = {.n = 4, .c = 1, .h = 28, .w = 28, .o = 32, .kh = 3, .kw = 3};
  g[1] = {.n = 4, .c = 32, .h = 13, .w = 13, .o = 64, .kh = 3, .kw = 3};
  g[2] = {.n = 2, .c = 4, .h = 9, .w = 8, .o = 6, .kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_h = 1,
          .pad_w = 2, .dil_h = 2, .dil_w = 1, .groups = 2};
  return g;
}

std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  cpu::cast_bf16_to_f32(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

// |a - b| against the largest |b|: f32 sums in another order differ by ulps.
double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (float v : b) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst / scale;
}

TEST(Bf16Conv2d, EveryImplementationEqualsF32OnTheSameValues) {
  Generator gen(6);
  for (const auto& g : conv_geometries()) {
    const int64_t xs = g.n * g.c * g.h * g.w, ws = g.o * (g.c / g.groups) * g.kh * g.kw;
    const int64_t ys = g.n * g.o * g.oh() * g.ow();
    const auto x = random_bf16(xs, gen), w = random_bf16(ws, gen), dy = random_bf16(ys, gen);
    std::vector<float> b(static_cast<size_t>(g.o));
    for (auto& v : b) v = static_cast<float>(gen.uniform());
    const auto xf = widen(x), wf = widen(w), dyf = widen(dy);
    // The f32 reference: im2col + GEMM on the widened values.
    std::vector<float> y0(ys), dx0(xs), dw0(ws), db0(g.o);
    cpu::conv2d_forward<float>(g, xf.data(), wf.data(), b.data(), y0.data(), cpu::ConvBackend::im2col);
    cpu::conv2d_backward_data<float>(g, dyf.data(), wf.data(), dx0.data(), cpu::ConvBackend::im2col);
    cpu::conv2d_backward_weights<float>(g, dyf.data(), xf.data(), dw0.data(), db0.data(), cpu::ConvBackend::im2col);
    for (auto backend : {cpu::ConvBackend::onednn_plain, cpu::ConvBackend::onednn_blocked, cpu::ConvBackend::im2col}) {
      std::vector<float> y(ys), dx(xs), dw(ws), db(g.o);
      cpu::conv2d_forward(g, x.data(), w.data(), b.data(), y.data(), backend);
      cpu::conv2d_backward_data(g, dy.data(), w.data(), dx.data(), backend);
      cpu::conv2d_backward_weights(g, dy.data(), x.data(), dw.data(), db.data(), backend);
      const std::string what = g.to_string() + " " + std::string(cpu::name(backend));
      EXPECT_LT(max_rel(y, y0), 1e-5) << what;
      EXPECT_LT(max_rel(dx, dx0), 1e-5) << what;
      EXPECT_LT(max_rel(dw, dw0), 1e-5) << what;
      EXPECT_LT(max_rel(db, db0), 1e-5) << what;
    }
    // automatic: every trial of the autotuner (bf16 kernels and widened f32
    // ones, pool and one thread) must give the same values, in every pass.
    for (int call = 0; call < 10 * cpu::kTuningTrials + 1; ++call) {
      std::vector<float> y(ys), dx(xs), dw(ws), db(g.o);
      cpu::conv2d_forward(g, x.data(), w.data(), b.data(), y.data());
      cpu::conv2d_backward_data(g, dy.data(), w.data(), dx.data());
      cpu::conv2d_backward_weights(g, dy.data(), x.data(), dw.data(), db.data());
      ASSERT_LT(max_rel(y, y0), 1e-5) << g.to_string() << " call " << call;
      ASSERT_LT(max_rel(dx, dx0), 1e-5) << g.to_string() << " call " << call;
      ASSERT_LT(max_rel(dw, dw0), 1e-5) << g.to_string() << " call " << call;
      ASSERT_LT(max_rel(db, db0), 1e-5) << g.to_string() << " call " << call;
    }
    for (auto pass : {cpu::ConvPass::forward, cpu::ConvPass::backward_data, cpu::ConvPass::backward_weights}) {
      EXPECT_NE(cpu::conv_choice(g, pass, DType::bf16), cpu::ConvBackend::automatic) << g.to_string();
    }
  }
}

}  // namespace
}  // namespace braid
