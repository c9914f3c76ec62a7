// conv2d beyond the op table (cases_conv.cc): every implementation against
// direct loops and against each other, the autotuner, and error messages.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/conv.h"
#include "braid/tensor/cpu/autotune.h"
#include "conv_geometries.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using cpu::ConvBackend;
using testing::all_close;
using testing::random_tensor;
using testing::strided_copy;

using Case = testing::ConvGeometry;
const std::vector<Case>& cases() { return testing::conv_geometries(); }

// Direct loops in double: y, and dx/dw/db for an output gradient dy.
struct Naive {
  std::vector<double> y, dx, dw, db;
};
Naive naive_conv(const Tensor& xt, const Tensor& wt, const Tensor& bt, const Tensor& dyt,
                 const Conv2dOptions& o) {
  const auto x = xt.to_vector<double>(), w = wt.to_vector<double>();
  const int64_t n = xt.size(0), c = xt.size(1), h = xt.size(2), wd = xt.size(3);
  const int64_t oc = wt.size(0), cg = wt.size(1), kh = wt.size(2), kw = wt.size(3);
  const int64_t og = oc / o.groups;
  const int64_t oh = (h + 2 * o.padding[0] - o.dilation[0] * (kh - 1) - 1) / o.stride[0] + 1;
  const int64_t ow = (wd + 2 * o.padding[1] - o.dilation[1] * (kw - 1) - 1) / o.stride[1] + 1;
  const auto dy = dyt.defined() ? dyt.to_vector<double>() : std::vector<double>(n * oc * oh * ow, 0.0);
  Naive r{std::vector<double>(n * oc * oh * ow, 0.0), std::vector<double>(x.size(), 0.0),
          std::vector<double>(w.size(), 0.0), std::vector<double>(oc, 0.0)};
  const auto b = bt.defined() ? bt.to_vector<double>() : std::vector<double>(oc, 0.0);
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t f = 0; f < oc; ++f)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          const int64_t yi = ((ni * oc + f) * oh + yy) * ow + xx;
          double s = b[f];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = yy * o.stride[0] - o.padding[0] + i * o.dilation[0];
                const int64_t ix = xx * o.stride[1] - o.padding[1] + j * o.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const int64_t xi = ((ni * c + (f / og) * cg + ci) * h + iy) * wd + ix;
                const int64_t wi = ((f * cg + ci) * kh + i) * kw + j;
                s += x[xi] * w[wi];
                r.dx[xi] += dy[yi] * w[wi];
                r.dw[wi] += dy[yi] * x[xi];
              }
          r.y[yi] = s;
          r.db[f] += dy[yi];
        }
  return r;
}

Tensor f32_of(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s).to(DType::f32); }

TEST(Conv2d, EveryBackendMatchesDirectLoopsForwardAndBackward) {
  Generator gen(11);
  for (ConvBackend backend :
       {ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked, ConvBackend::winograd}) {
    for (const Case& c : cases()) {
      Tensor x = random_tensor(c.x, DType::f32, gen), w = random_tensor(c.w, DType::f32, gen);
      Tensor b = c.bias ? random_tensor({c.w[0]}, DType::f32, gen) : Tensor();
      Tensor xv = strided_copy(x);  // non-contiguous input
      for (Tensor t : {xv, w, b}) {
        if (t.defined()) t.set_requires_grad();
      }
      Conv2dOptions opt = c.opt;
      opt.backend = backend;
      Tensor y = conv2d(xv, w, b, opt);
      Tensor dy = random_tensor(y.shape(), DType::f32, gen);
      backward(y, dy);
      const Naive ref = naive_conv(x, w, b, dy, c.opt);
      const std::string what = std::string(cpu::name(backend)) + " x " + to_string(c.x) + " w " + to_string(c.w);
      EXPECT_TRUE(all_close(y, f32_of(ref.y, y.shape()), 1e-4, 1e-5)) << what;
      EXPECT_TRUE(all_close(xv.grad(), f32_of(ref.dx, c.x), 1e-4, 1e-5)) << what;
      EXPECT_TRUE(all_close(w.grad(), f32_of(ref.dw, c.w), 1e-4, 1e-4)) << what;
      if (c.bias) {
        EXPECT_TRUE(all_close(b.grad(), f32_of(ref.db, {c.w[0]}), 1e-4, 1e-4)) << what;
      }
    }
  }
}

TEST(Conv2d, FashionMnistShapesAgreeAcrossBackends) {
  Generator gen(12);
  for (auto [xs, ws] : {std::pair<Shape, Shape>{{8, 1, 28, 28}, {32, 1, 3, 3}}, {{8, 32, 13, 13}, {64, 32, 3, 3}}}) {
    Tensor x = random_tensor(xs, DType::f32, gen), w = random_tensor(ws, DType::f32, gen);
    Tensor b = random_tensor({ws[0]}, DType::f32, gen);
    std::vector<std::vector<Tensor>> got;
    for (ConvBackend backend :
         {ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked, ConvBackend::winograd}) {
      Tensor xv = x.detach(), wv = w.detach(), bv = b.detach();
      for (Tensor t : {xv, wv, bv}) t.set_requires_grad();
      Tensor y = conv2d(xv, wv, bv, {.backend = backend});
      backward(y, Tensor::ones(y.shape()));
      got.push_back({y, xv.grad(), wv.grad(), bv.grad()});
    }
    for (size_t k = 1; k < got.size(); ++k)
      for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(all_close(got[k][i], got[0][i], 1e-4, 1e-4)) << k << " " << i;
  }
}

// Winograd gives each of 2 threads whole blocks of images when there are at
// least 2 blocks a thread (8 images of 15x15 tiles: a block each), summing the
// weight gradient per thread; and splits each block's phases otherwise.
TEST(Conv2d, WinogradOverTwoThreadsMatchesIm2col) {
  Generator gen(16);
  ThreadsScope two(2);
  for (const Shape& xs : {Shape{8, 3, 30, 30}, Shape{2, 5, 9, 9}}) {
    Tensor x = random_tensor(xs, DType::f32, gen), w = random_tensor({4, xs[1], 3, 3}, DType::f32, gen);
    Tensor b = random_tensor({4}, DType::f32, gen);
    std::vector<std::vector<Tensor>> got;
    for (ConvBackend backend : {ConvBackend::im2col, ConvBackend::winograd}) {
      Tensor xv = x.detach(), wv = w.detach(), bv = b.detach();
      for (Tensor t : {xv, wv, bv}) t.set_requires_grad();
      Tensor y = conv2d(xv, wv, bv, {.padding = {1, 1}, .backend = backend});
      backward(y, Tensor::ones(y.shape()));
      got.push_back({y, xv.grad(), wv.grad(), bv.grad()});
    }
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(all_close(got[1][i], got[0][i], 1e-4, 1e-4)) << to_string(xs) << " " << i;
  }
}

TEST(Conv2d, AutotunerSettlesAndEveryStepMatchesIm2col) {
  Generator gen(15);
  Tensor x = random_tensor({3, 4, 9, 9}, DType::f32, gen), w = random_tensor({5, 4, 3, 3}, DType::f32, gen);
  Tensor b = random_tensor({5}, DType::f32, gen);
  auto step = [&](ConvBackend backend) {
    Tensor xv = x.detach(), wv = w.detach(), bv = b.detach();
    for (Tensor t : {xv, wv, bv}) t.set_requires_grad();
    Tensor y = conv2d(xv, wv, bv, {.padding = {1, 1}, .backend = backend});
    backward(y, Tensor::ones(y.shape()));
    return std::vector<Tensor>{y, xv.grad(), wv.grad(), bv.grad()};
  };
  const auto ref = step(ConvBackend::im2col);
  for (int i = 0; i < 8 * cpu::kTuningTrials + 1; ++i) {  // up to 8 candidates x the trials, then settled
    const auto got = step(ConvBackend::automatic);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(all_close(got[k], ref[k], 1e-4, 1e-4)) << i << " " << k;
  }
  cpu::Conv2dGeometry g;
  g.n = 3, g.c = 4, g.h = g.w = 9, g.o = 5, g.kh = g.kw = 3, g.pad_h = g.pad_w = 1;
  for (auto pass : {cpu::ConvPass::forward, cpu::ConvPass::backward_data, cpu::ConvPass::backward_weights}) {
    EXPECT_NE(cpu::conv_choice(g, pass), ConvBackend::automatic);
  }
}

TEST(Conv2d, BadInputRaisesValueErrorNamingOpAndShapes) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string m = message([] { conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 4, 3, 3})); });
  EXPECT_NE(m.find("conv2d"), std::string::npos) << m;
  EXPECT_NE(m.find("[1, 3, 5, 5]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 4, 3, 3]"), std::string::npos) << m;
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 5, 5}, DType::i32), Tensor::zeros({2, 3, 3, 3}, DType::i32)), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 3, 3, 3}, DType::f64)), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({3, 5, 5}), Tensor::zeros({2, 3, 3, 3})), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 2, 2}), Tensor::zeros({2, 3, 3, 3})), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 4, 5, 5}), Tensor::zeros({3, 2, 3, 3}), Tensor(), {.groups = 2}), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 3, 3, 3}), Tensor::zeros({3})), ValueError);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 3, 3, 3}), Tensor(), {.stride = {0, 1}}), ValueError);
}

}  // namespace
}  // namespace braid
