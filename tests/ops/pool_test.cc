// max_pool2d / avg_pool2d: direct loops, finite differences (f64), PyTorch (f32).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/pool.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::strided_copy;

struct Case {
  Shape x;
  Pool2dOptions opt;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{2, 3, 8, 8}, {}},
      {{2, 3, 9, 7}, {}},  // odd sizes: the last row/column is dropped
      {{1, 2, 7, 9}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {{2, 2, 6, 5}, {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0}}},
      {{3, 5, 5}, {.kernel = {2, 3}, .stride = {1, 1}}},
      {{1, 1, 4, 4}, {.kernel = {4, 4}}},
  };
  return c;
}

// Direct loops in double: max and avg pooling values and their input gradients for dy.
struct Naive {
  std::vector<double> max_y, max_dx, avg_y, avg_dx;
};
Naive naive_pool(const Tensor& xt, const Pool2dOptions& o, const Tensor& dy_max, const Tensor& dy_avg) {
  const auto x = xt.to_vector<double>();
  const int64_t h = xt.size(-2), w = xt.size(-1), planes = xt.numel() / (h * w);
  const int64_t sh = o.stride[0] ? o.stride[0] : o.kernel[0], sw = o.stride[1] ? o.stride[1] : o.kernel[1];
  const int64_t oh = (h + 2 * o.padding[0] - o.kernel[0]) / sh + 1, ow = (w + 2 * o.padding[1] - o.kernel[1]) / sw + 1;
  const auto gm = dy_max.to_vector<double>(), ga = dy_avg.to_vector<double>();
  Naive r{std::vector<double>(planes * oh * ow), std::vector<double>(x.size(), 0.0),
          std::vector<double>(planes * oh * ow), std::vector<double>(x.size(), 0.0)};
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t o_i = (p * oh + oy) * ow + ox;
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t at = -1, count = 0;
        for (int64_t i = 0; i < o.kernel[0]; ++i)
          for (int64_t j = 0; j < o.kernel[1]; ++j) {
            const int64_t iy = oy * sh - o.padding[0] + i, ix = ox * sw - o.padding[1] + j;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const int64_t xi = (p * h + iy) * w + ix;
            if (x[xi] > best) best = x[xi], at = xi;
            sum += x[xi];
            ++count;
          }
        const double div = o.count_include_pad ? double(o.kernel[0] * o.kernel[1]) : double(count);
        r.max_y[o_i] = best;
        r.max_dx[at] += gm[o_i];
        r.avg_y[o_i] = sum / div;
        for (int64_t i = 0; i < o.kernel[0]; ++i)
          for (int64_t j = 0; j < o.kernel[1]; ++j) {
            const int64_t iy = oy * sh - o.padding[0] + i, ix = ox * sw - o.padding[1] + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w) r.avg_dx[(p * h + iy) * w + ix] += ga[o_i] / div;
          }
      }
  return r;
}

Tensor f32_of(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s).to(DType::f32); }

TEST(Pool2d, MatchesDirectLoopsForwardAndBackward) {
  Generator gen(21);
  for (bool include : {true, false}) {
    for (const Case& c : cases()) {
      Pool2dOptions opt = c.opt;
      opt.count_include_pad = include;
      Tensor x = random_tensor(c.x, DType::f32, gen);
      Tensor xm = x.ndim() == 4 ? strided_copy(x) : x.detach(), xa = x.detach();
      xm.set_requires_grad();
      xa.set_requires_grad();
      Tensor ym = max_pool2d(xm, opt), ya = avg_pool2d(xa, opt);
      Tensor gm = random_tensor(ym.shape(), DType::f32, gen), ga = random_tensor(ya.shape(), DType::f32, gen);
      backward(ym, gm);
      backward(ya, ga);
      const Naive ref = naive_pool(x, opt, gm, ga);
      const std::string what = to_string(c.x) + (include ? " include_pad" : " exclude_pad");
      EXPECT_TRUE(all_close(ym, f32_of(ref.max_y, ym.shape()))) << what;
      EXPECT_TRUE(all_close(xm.grad(), f32_of(ref.max_dx, c.x))) << what;
      EXPECT_TRUE(all_close(ya, f32_of(ref.avg_y, ya.shape()), 1e-5, 1e-6)) << what;
      EXPECT_TRUE(all_close(xa.grad(), f32_of(ref.avg_dx, c.x), 1e-5, 1e-6)) << what;
    }
  }
}

TEST(Pool2d, MaxPoolPropagatesNaN) {
  Tensor x = Tensor::from_vector<float>({1, std::nanf(""), 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x).item()));
}

TEST(Pool2d, GradcheckF64) {
  Generator gen(22);
  for (const Case& c : cases()) {
    Tensor x = random_tensor(c.x, DType::f64, gen);
    x.set_requires_grad();
    const Pool2dOptions opt = c.opt;
    auto rm = autograd::gradcheck([opt](const std::vector<Tensor>& in) { return max_pool2d(in[0], opt); }, {x});
    EXPECT_TRUE(rm.ok) << "max " << to_string(c.x) << "\n" << rm.report;
    for (bool include : {true, false}) {
      Pool2dOptions o2 = opt;
      o2.count_include_pad = include;
      auto ra = autograd::gradcheck([o2](const std::vector<Tensor>& in) { return avg_pool2d(in[0], o2); }, {x});
      EXPECT_TRUE(ra.ok) << "avg " << to_string(c.x) << "\n" << ra.report;
    }
  }
}

TEST(Pool2d, BadInputRaisesValueError) {
  try {
    max_pool2d(Tensor::zeros({1, 1, 3, 3}), {.kernel = {4, 4}});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[1, 1, 3, 3]"), std::string::npos);
  }
  EXPECT_THROW(avg_pool2d(Tensor::zeros({4, 4})), ValueError);
  EXPECT_THROW(avg_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64)), ValueError);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 4, 4}), {.kernel = {2, 2}, .padding = {2, 0}}), ValueError);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 4, 4}), {.kernel = {2, 2}, .stride = {-1, 1}}), ValueError);
}

TEST(Pool2dTorch, ValuesAndGradientsMatchPyTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(23);
  std::vector<testing::TorchCase> tc;
  std::vector<std::pair<Tensor, Tensor>> got;
  for (const Case& c : cases()) {
    for (int kind = 0; kind < 3; ++kind) {  // max, avg include pad, avg exclude pad
      Pool2dOptions opt = c.opt;
      opt.count_include_pad = kind != 2;
      Tensor x = random_tensor(c.x, DType::f32, gen);
      Tensor xv = x.ndim() == 4 ? strided_copy(x) : x.detach();
      xv.set_requires_grad();
      Tensor y = kind == 0 ? max_pool2d(xv, opt) : avg_pool2d(xv, opt);
      Tensor r = random_tensor(y.shape(), DType::f32, gen);
      backward(y, r);
      got.emplace_back(y, xv.grad());
      const std::string args = fmt::format("({}, {}), stride=({}, {}), padding=({}, {})", opt.kernel[0], opt.kernel[1],
                                           opt.stride[0] ? opt.stride[0] : opt.kernel[0],
                                           opt.stride[1] ? opt.stride[1] : opt.kernel[1], opt.padding[0], opt.padding[1]);
      const std::string expr = kind == 0 ? "F.max_pool2d(x, " + args + ")"
                                         : "F.avg_pool2d(x, " + args + (kind == 1 ? ", count_include_pad=True)" : ", count_include_pad=False)");
      tc.push_back({expr, {{"x", x}}, {.grad = {"x"}, .grad_output = r}});
    }
  }
  auto refs = testing::torch_eval_batch(tc);
  for (size_t i = 0; i < tc.size(); ++i) {
    EXPECT_TRUE(all_close(got[i].first, refs[i].value(), 1e-5, 1e-6)) << tc[i].expr;
    EXPECT_TRUE(all_close(got[i].second, refs[i].grads.at("x"), 1e-5, 1e-6)) << tc[i].expr;
  }
}

}  // namespace
}  // namespace braid
