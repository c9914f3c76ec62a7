// nn::distillation_loss against an independent double-precision reference
// of its value and gradient (the closed forms in braid/nn/loss.h), finite
// differences, cross-entropy at alpha = 0, and Hinton et al.'s high-
// temperature limit (matching zero-mean logits).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/nn/loss.h"
#include "braid/ops/softmax.h"
#include "tests/ops/gradcheck_util.h"

namespace braid::nn {
namespace {

using testing::leaf;

struct Problem {
  int64_t n = 0, c = 0;
  std::vector<double> student{}, teacher_logits{}, teacher{};  // [n, c]
  std::vector<int64_t> target{};                                // [n]
};

// softmax(z / t) of each row of z [n, c], in double.
std::vector<double> softmax_rows(const std::vector<double>& z, int64_t n, int64_t c, double t) {
  std::vector<double> out(z.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; ++k) m = std::max(m, z[i * c + k] / t);
    for (int64_t k = 0; k < c; ++k) s += out[i * c + k] = std::exp(z[i * c + k] / t - m);
    for (int64_t k = 0; k < c; ++k) out[i * c + k] /= s;
  }
  return out;
}

// Random logits with zero mean per row (the high-temperature limit assumes
// it), the teacher's probabilities at temperature t, random targets.
Problem make_problem(int64_t n, int64_t c, double t, uint64_t seed) {
  Problem p{.n = n, .c = c};
  Generator g(seed);
  for (auto* v : {&p.student, &p.teacher_logits}) {
    for (int64_t i = 0; i < n; ++i) {
      double mean = 0;
      for (int64_t k = 0; k < c; ++k) mean += v->emplace_back(3 * g.normal());
      for (int64_t k = 0; k < c; ++k) (*v)[static_cast<size_t>(i * c + k)] -= mean / static_cast<double>(c);
    }
  }
  p.teacher = softmax_rows(p.teacher_logits, n, c, t);
  for (int64_t i = 0; i < n; ++i) p.target.push_back(static_cast<int64_t>(g.next_u32() % static_cast<uint32_t>(c)));
  return p;
}

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector<double>(v, s); }

// The loss and d loss / d student of braid/nn/loss.h's formula, by hand.
std::pair<double, std::vector<double>> reference(const Problem& p, double t, double alpha) {
  const std::vector<double> q = softmax_rows(p.student, p.n, p.c, t), s1 = softmax_rows(p.student, p.n, p.c, 1);
  const double n = static_cast<double>(p.n);
  double kl = 0, ce = 0;
  std::vector<double> grad(p.student.size());
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t k = 0; k < p.c; ++k) {
      const size_t j = static_cast<size_t>(i * p.c + k);
      if (p.teacher[j] > 0) kl += p.teacher[j] * (std::log(p.teacher[j]) - std::log(q[j]));
      const double onehot = k == p.target[static_cast<size_t>(i)] ? 1 : 0;
      grad[j] = alpha * t / n * (q[j] - p.teacher[j]) + (1 - alpha) / n * (s1[j] - onehot);
    }
    ce -= std::log(s1[static_cast<size_t>(i * p.c + p.target[static_cast<size_t>(i)])]);
  }
  return {alpha * t * t * kl / n + (1 - alpha) * ce / n, grad};
}

std::vector<double> loss_grad(const Problem& p, double t, double alpha, double* value = nullptr) {
  Tensor z = leaf(f64(p.student, {p.n, p.c}));
  Tensor loss = distillation_loss(z, f64(p.teacher, {p.n, p.c}), Tensor::from_vector<int64_t>(p.target, {p.n}), t, alpha);
  if (value) *value = loss.item();
  backward(loss);
  return z.grad().to_vector<double>();
}

TEST(DistillationLoss, ValueAndGradientMatchClosedForm) {
  for (double t : {0.5, 1.0, 2.0, 4.0, 20.0}) {
    for (double alpha : {0.0, 0.3, 0.9, 1.0}) {
      const Problem p = make_problem(7, 5, t, 3);
      double value = 0;
      const std::vector<double> g = loss_grad(p, t, alpha, &value);
      const auto [ref, ref_grad] = reference(p, t, alpha);
      EXPECT_NEAR(value, ref, 1e-12 * std::max(1.0, std::abs(ref))) << "T " << t << " alpha " << alpha;
      for (size_t j = 0; j < g.size(); ++j) ASSERT_NEAR(g[j], ref_grad[j], 1e-13) << "T " << t << " alpha " << alpha;
    }
  }
}

TEST(DistillationLoss, Gradcheck) {
  const Problem p = make_problem(4, 6, 3.0, 5);
  const Tensor teacher = f64(p.teacher, {p.n, p.c});
  const Tensor target = Tensor::from_vector<int64_t>(p.target, {p.n});
  testing::expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return distillation_loss(in[0], teacher, target, 3.0, 0.7); },
      {leaf(f64(p.student, {p.n, p.c}))}, "distillation_loss");
}

TEST(DistillationLoss, AlphaZeroIsCrossEntropy) {
  const Problem p = make_problem(9, 10, 4.0, 7);
  const Tensor target = Tensor::from_vector<int64_t>(p.target, {p.n});
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor a = leaf(f64(p.student, {p.n, p.c}).to(dtype)), b = leaf(a.detach().clone());
    Tensor d = distillation_loss(a, f64(p.teacher, {p.n, p.c}).to(dtype), target, 4.0, 0.0);
    Tensor ce = cross_entropy_loss(b, target);
    EXPECT_EQ(d.item(), ce.item());
    backward(d);
    backward(ce);
    EXPECT_EQ(a.grad().to_vector<double>(), b.grad().to_vector<double>());
  }
}

TEST(DistillationLoss, TeacherEqualToStudentCostsNothingAtAlphaOne) {
  Problem p = make_problem(6, 4, 2.5, 9);
  p.teacher = softmax_rows(p.student, p.n, p.c, 2.5);  // KL(q || q) = 0, gradient q - q = 0
  double value = 1;
  for (double g : loss_grad(p, 2.5, 1.0, &value)) EXPECT_NEAR(g, 0, 1e-15);
  EXPECT_NEAR(value, 0, 1e-12);
}

// Hinton et al. (2015), section 2.1: at high temperature, with zero-mean
// logits, d/dz of T^2 KL tends to (z - z_teacher) / (N C): distillation
// becomes matching the teacher's logits. At T = 1 the two differ widely.
TEST(DistillationLoss, HighTemperatureMatchesLogits) {
  auto worst_gap = [](double t) {
    const Problem p = make_problem(5, 8, t, 11);
    const std::vector<double> g = loss_grad(p, t, 1.0);
    double worst = 0, scale = 0;
    for (size_t j = 0; j < g.size(); ++j) {
      const double limit = (p.student[j] - p.teacher_logits[j]) / static_cast<double>(p.n * p.c);
      worst = std::max(worst, std::abs(g[j] - limit));
      scale = std::max(scale, std::abs(limit));
    }
    return worst / scale;
  };
  EXPECT_GT(worst_gap(1.0), 0.3);
  EXPECT_LT(worst_gap(100.0), 2e-2);
  EXPECT_LT(worst_gap(1000.0), 2e-3);  // the gap shrinks as 1 / T
}

TEST(DistillationLoss, RefusesBadArguments) {
  const Tensor z = Tensor::zeros({3, 4}), p = Tensor::full({3, 4}, 0.25);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2}, {3});
  EXPECT_THROW(distillation_loss(z, p, y, 0.0, 0.5), ValueError);
  EXPECT_THROW(distillation_loss(z, p, y, 2.0, 1.5), ValueError);
  EXPECT_THROW(distillation_loss(z, Tensor::full({3, 5}, 0.2), y, 2.0, 0.5), ValueError);
  EXPECT_THROW(distillation_loss(z, p.to(DType::f64), y, 2.0, 0.5), ValueError);
  EXPECT_THROW(distillation_loss(z, p, Tensor::from_vector<int64_t>({0, 1, 7}, {3}), 2.0, 0.5), IndexError);
}

}  // namespace
}  // namespace braid::nn
