// matmul / batched matmul / linear: naive loops, finite differences, PyTorch.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/linear.h"
#include "braid/ops/matmul.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/tensor/cpu/gemm.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::strided_copy;

// Naive [b?, m, k] x [b?, k, n] in double, batch broadcast; independent of BLAS.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t ba = a.ndim() == 3 ? a.size(0) : 1, bb = b.ndim() == 3 ? b.size(0) : 1;
  const int64_t batch = std::max(ba, bb), m = a.size(-2), k = a.size(-1), n = b.size(-1);
  auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> out(batch * m * n, 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += av[(ba == 1 ? 0 : t) * m * k + i * k + p] * bv[(bb == 1 ? 0 : t) * k * n + p * n + j];
        out[t * m * n + i * n + j] = s;
      }
  Shape shape = (a.ndim() == 3 || b.ndim() == 3) ? Shape{batch, m, n} : Shape{m, n};
  return Tensor::from_vector(out, shape).to(a.dtype());
}

// [r, c] tensor whose values equal `t` but stored transposed (a .t() view).
Tensor transposed_view(const Tensor& t) {
  Tensor s = Tensor::empty({t.size(1), t.size(0)}, t.dtype());
  Tensor view = s.as_strided(t.shape(), {1, t.size(0)}, 0);
  view.copy_from(t);
  return view;
}

TEST(Matmul, MatchesNaiveLoopsOnManyLayouts) {
  Generator gen(1);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5, 7}, {7, 3}},     {{1, 4}, {4, 1}},       {{64, 784}, {784, 10}}, {{3, 5, 4}, {3, 4, 6}},
      {{1, 5, 4}, {3, 4, 2}}, {{5, 4}, {3, 4, 2}}, {{3, 5, 4}, {4, 2}},    {{2, 0, 3}, {3, 4}},
      {{4, 0}, {0, 5}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_tensor(sa, DType::f32, gen), b = random_tensor(sb, DType::f32, gen);
    EXPECT_TRUE(all_close(matmul(a, b), naive_matmul(a, b), 1e-4, 1e-5))
        << to_string(sa) << " x " << to_string(sb);
    EXPECT_TRUE(all_close(matmul(strided_copy(a), strided_copy(b)), naive_matmul(a, b), 1e-4, 1e-5))
        << "non-contiguous " << to_string(sa) << " x " << to_string(sb);
  }
  Tensor a = random_tensor({6, 5}, DType::f32, gen), b = random_tensor({5, 4}, DType::f32, gen);
  EXPECT_TRUE(all_close(matmul(transposed_view(a), transposed_view(b)), naive_matmul(a, b), 1e-4, 1e-5));
}

TEST(Matmul, BothGemmLibrariesAgree) {
  Generator gen(2);
  Tensor a = random_tensor({33, 70}, DType::f32, gen), b = random_tensor({70, 45}, DType::f32, gen);
  cpu::set_default_gemm_backend(cpu::GemmBackend::openblas);
  Tensor x = matmul(a, b);
  cpu::set_default_gemm_backend(cpu::GemmBackend::onednn);
  Tensor y = matmul(a, b);
  cpu::set_default_gemm_backend(cpu::GemmBackend::automatic);
  EXPECT_TRUE(all_close(x, y, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(x, naive_matmul(a, b), 1e-4, 1e-5));
  // The autotuner settles on one library after a few calls of a shape.
  for (int i = 0; i < 4 * cpu::kTuningTrials + 1; ++i) {  // <= 4 candidates x the trials
    EXPECT_TRUE(all_close(matmul(a, b), x, 1e-5, 1e-5));
  }
  EXPECT_NE(cpu::gemm_choice(false, false, 33, 45, 70), cpu::GemmBackend::automatic);
}

TEST(Matmul, GradcheckF64) {
  Generator gen(3);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 2}}, {{2, 3, 4}, {2, 4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{1, 3, 2}, {3, 2, 2}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_tensor(sa, DType::f64, gen), b = random_tensor(sb, DType::f64, gen);
    a.set_requires_grad();
    b.set_requires_grad();
    auto r = autograd::gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b});
    EXPECT_TRUE(r.ok) << to_string(sa) << " x " << to_string(sb) << "\n" << r.report;
  }
}

TEST(Linear, GradcheckF64WithAndWithoutBias) {
  Generator gen(4);
  Tensor x = random_tensor({5, 3}, DType::f64, gen), w = random_tensor({4, 3}, DType::f64, gen);
  Tensor b = random_tensor({4}, DType::f64, gen), x3 = random_tensor({2, 3, 3}, DType::f64, gen);
  for (Tensor t : {x, w, b, x3}) t.set_requires_grad();
  auto with = autograd::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  EXPECT_TRUE(with.ok) << with.report;
  auto without = autograd::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w});
  EXPECT_TRUE(without.ok) << without.report;
  auto batched = autograd::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x3, w, b});
  EXPECT_TRUE(batched.ok) << batched.report;
}

TEST(Matmul, BadInputRaisesValueErrorNamingOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  try {
    matmul(a, b);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos);
  }
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}, DType::i32), Tensor::zeros({3, 2}, DType::i32)), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::f64)), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({3}), Tensor::zeros({3, 2})), ValueError);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), ValueError);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({3})), ValueError);
}

TEST(MatmulTorch, ValuesAndGradientsMatchPyTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(5);
  struct Case { Shape a, b; bool strided; };
  const std::vector<Case> cases = {{{7, 5}, {5, 3}, false}, {{7, 5}, {5, 3}, true}, {{4, 6, 5}, {4, 5, 2}, false},
                                   {{6, 5}, {3, 5, 2}, true}, {{3, 6, 5}, {5, 2}, false}, {{1, 6, 5}, {3, 5, 2}, true}};
  std::vector<testing::TorchCase> tc;
  std::vector<Tensor> outs, ga, gb;
  for (const auto& c : cases) {
    Tensor a = random_tensor(c.a, DType::f32, gen), b = random_tensor(c.b, DType::f32, gen);
    Tensor av = c.strided ? strided_copy(a) : a, bv = c.strided ? strided_copy(b) : b;
    av.set_requires_grad();
    bv.set_requires_grad();
    Tensor out = matmul(av, bv);
    Tensor r = random_tensor(out.shape(), DType::f32, gen);
    backward(out, r);
    outs.push_back(out);
    ga.push_back(av.grad());
    gb.push_back(bv.grad());
    tc.push_back({"torch.matmul(a, b)", {{"a", a}, {"b", b}}, {.grad = {"a", "b"}, .grad_output = r}});
  }
  auto refs = testing::torch_eval_batch(tc);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(all_close(outs[i], refs[i].value(), 1e-4, 1e-5)) << i;
    EXPECT_TRUE(all_close(ga[i], refs[i].grads.at("a"), 1e-4, 1e-5)) << i;
    EXPECT_TRUE(all_close(gb[i], refs[i].grads.at("b"), 1e-4, 1e-5)) << i;
  }
}

TEST(LinearTorch, ValuesAndGradientsMatchPyTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(6);
  struct Case { Shape x; int64_t out; bool bias, strided; };
  const std::vector<Case> cases = {{{64, 78}, 25, true, false}, {{9, 13}, 10, false, true}, {{2, 5, 7}, 3, true, false}, {{1, 4}, 1, true, true}};
  std::vector<testing::TorchCase> tc;
  std::vector<std::vector<Tensor>> got;
  for (const auto& c : cases) {
    Tensor x = random_tensor(c.x, DType::f32, gen), w = random_tensor({c.out, c.x.back()}, DType::f32, gen);
    Tensor b = random_tensor({c.out}, DType::f32, gen);
    Tensor xv = c.strided ? strided_copy(x) : x, wv = c.strided ? strided_copy(w) : w;
    for (Tensor t : {xv, wv, b}) t.set_requires_grad();
    Tensor y = c.bias ? linear(xv, wv, b) : linear(xv, wv);
    Tensor r = random_tensor(y.shape(), DType::f32, gen);
    backward(y, r);
    got.push_back({y, xv.grad(), wv.grad(), c.bias ? b.grad() : Tensor()});
    if (c.bias) {
      tc.push_back({"F.linear(x, w, b)", {{"x", x}, {"w", w}, {"b", b}}, {.grad = {"x", "w", "b"}, .grad_output = r}});
    } else {
      tc.push_back({"F.linear(x, w)", {{"x", x}, {"w", w}}, {.grad = {"x", "w"}, .grad_output = r}});
    }
  }
  auto refs = testing::torch_eval_batch(tc);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(all_close(got[i][0], refs[i].value(), 1e-4, 1e-5)) << i;
    EXPECT_TRUE(all_close(got[i][1], refs[i].grads.at("x"), 1e-4, 1e-5)) << i;
    EXPECT_TRUE(all_close(got[i][2], refs[i].grads.at("w"), 1e-4, 1e-5)) << i;
    if (cases[i].bias) {
      EXPECT_TRUE(all_close(got[i][3], refs[i].grads.at("b"), 1e-4, 1e-5)) << i;
    }
  }
}

}  // namespace
}  // namespace braid
