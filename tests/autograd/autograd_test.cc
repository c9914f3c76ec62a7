// Engine tests with hand-written ops (the ops layer sits above autograd).
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/autograd/node.h"

namespace braid::autograd {
namespace {

// y = a * x, elementwise on contiguous f64.
Tensor scale(const Tensor& x, double a) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  const double* px = x.contiguous().data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = a * px[i];
  record("scale", {x}, y, [a](const Tensor& g) { return std::vector<Tensor>{scale(g, a)}; });
  return y;
}

// z = x * y, elementwise.
Tensor mul(const Tensor& x, const Tensor& y) {
  Tensor z = Tensor::empty(x.shape(), DType::f64);
  Tensor xc = x.contiguous(), yc = y.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) z.data<double>()[i] = xc.data<double>()[i] * yc.data<double>()[i];
  record("mul", {x, y}, z, [xd = x.detach(), yd = y.detach()](const Tensor& g) {
    NoGradGuard guard;
    return std::vector<Tensor>{mul(g, yd), mul(g, xd)};
  });
  return z;
}

TEST(Engine, ChainRuleAndFanOut) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad();
  Tensor y = scale(x, 2);  // 2x
  Tensor z = mul(y, x);    // 2x^2: x used twice
  backward(z, Tensor::ones({3}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 8, 12}));
}

TEST(Engine, AccumulatesAcrossBackwardCalls) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  x.set_requires_grad();
  backward(scale(x, 3), Tensor::ones({2}, DType::f64));
  backward(scale(x, 3), Tensor::ones({2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
}

TEST(Engine, ZeroGradKeepsTheBufferAndTheNextBackwardOverwritesIt) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  x.set_requires_grad();
  backward(scale(x, 3), Tensor::ones({2}, DType::f64));
  x.zero_grad();
  backward(scale(x, 5), Tensor::ones({2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 5}));  // not 8: the 3s were zeroed
  // A gradient someone else can see is copied into the kept buffer, so views
  // of it (a data-parallel bucket) stay valid.
  const void* buffer = x.grad().raw_data();
  x.zero_grad();
  Tensor held = Tensor::ones({2}, DType::f64);
  backward(x, held);  // x is a leaf: its gradient is `held` itself, still held here
  EXPECT_EQ(x.grad().raw_data(), buffer);
  EXPECT_NE(x.grad().raw_data(), held.raw_data());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  x.zero_grad();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0}));  // read before any backward
  backward(scale(x, 2), Tensor::ones({2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(Engine, NoGradRecordsNothing) {
  Tensor x = Tensor::from_vector<double>({1}, {1});
  x.set_requires_grad();
  NoGradGuard guard;
  Tensor y = scale(x, 2);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
}

TEST(Engine, GradReadyHookFiresWhenFinalAndBeforeEarlierLayers) {
  // Two "layers": w1 used first in forward, w2 last. w2's gradient is final
  // first and its hook must fire before w1's.
  Tensor x = Tensor::from_vector<double>({1, 1}, {2});
  Tensor w1 = Tensor::from_vector<double>({2, 2}, {2});
  Tensor w2 = Tensor::from_vector<double>({3, 3}, {2});
  w1.set_requires_grad();
  w2.set_requires_grad();
  std::vector<std::string> order;
  on_grad_ready(w1, [&](Tensor& g) { order.push_back("w1"); EXPECT_EQ(g.to_vector<double>()[0], 3.0); });
  on_grad_ready(w2, [&](Tensor& g) { order.push_back("w2"); EXPECT_EQ(g.to_vector<double>()[0], 2.0); });
  Tensor h = mul(x, w1);
  Tensor out = mul(h, w2);
  backward(out, Tensor::ones({2}, DType::f64));
  EXPECT_EQ(order, (std::vector<std::string>{"w2", "w1"}));
}

TEST(Engine, RejectsBadRoots) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  EXPECT_THROW(backward(x), ValueError);
  x.set_requires_grad();
  EXPECT_THROW(backward(scale(x, 2)), ValueError);  // not a scalar, no grad_output
  EXPECT_THROW(backward(scale(x, 2), Tensor::ones({3}, DType::f64)), ValueError);
}

TEST(Gradcheck, PassesCorrectAndCatchesWrongGradients) {
  Tensor a = Tensor::from_vector<double>({0.5, -1.0, 2.0}, {3});
  Tensor b = Tensor::from_vector<double>({1.5, 0.25, -3.0}, {3});
  a.set_requires_grad();
  b.set_requires_grad();
  auto good = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }, {a, b});
  EXPECT_TRUE(good.ok) << good.report;
  auto wrong = [](const std::vector<Tensor>& in) {
    Tensor z = Tensor::empty({3}, DType::f64);
    for (int i = 0; i < 3; ++i) z.data<double>()[i] = in[0].data<double>()[i] * in[0].data<double>()[i];
    record("bad_square", {in[0]}, z, [](const Tensor& g) { return std::vector<Tensor>{g.clone()}; });
    return z;
  };
  auto bad = gradcheck(wrong, {a});
  EXPECT_FALSE(bad.ok);
  EXPECT_FALSE(bad.report.empty());
}

}  // namespace
}  // namespace braid::autograd
