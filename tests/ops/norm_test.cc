// Norms beyond the op table (cases_norm.cc): the fused layer_norm against its
// composite in primitives, batch norm's running statistics on known values
// and eval mode without them, and weight norm's unit lengths.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/norm.h"
#include "braid/ops/reduce.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::random_tensor;

// layer_norm written in primitives, the reference for the fused kernel.
Tensor composite_layer_norm(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& w, const Tensor& b,
                            double eps) {
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor variance = mean(mul(centered, centered), dims, true);
  Tensor y = div(centered, sqrt(add(variance, eps)));
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}

TEST(Norm, FusedLayerNormEqualsComposite) {
  Generator gen(4);
  // Affine with every gradient, without affine parameters, and affine with a
  // frozen weight (the backward then skips g * xhat).
  enum Mode { affine, plain, frozen_weight };
  for (Mode mode : {affine, plain, frozen_weight}) {
    Tensor x = random_tensor({5, 3, 4, 6}, DType::f64, gen, -2, 3);
    Tensor w = random_tensor({4, 6}, DType::f64, gen), b = random_tensor({4, 6}, DType::f64, gen);
    Tensor r = random_tensor({5, 3, 4, 6}, DType::f64, gen);
    std::vector<Tensor> fused_in = {x.clone(), w.clone(), b.clone()}, comp_in = {x.clone(), w.clone(), b.clone()};
    for (auto* v : {&fused_in, &comp_in}) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i].set_requires_grad(!(mode == frozen_weight && i == 1));
    }
    const Tensor none;
    const bool params = mode != plain;
    Tensor yf = layer_norm(fused_in[0], {4, 6}, params ? fused_in[1] : none, params ? fused_in[2] : none, 1e-5);
    Tensor yc = composite_layer_norm(comp_in[0], {2, 3}, params ? comp_in[1] : none, params ? comp_in[2] : none, 1e-5);
    EXPECT_TRUE(all_close(yf, yc, 1e-12, 1e-12));
    backward(yf, r);
    backward(yc, r);
    EXPECT_TRUE(all_close(fused_in[0].grad(), comp_in[0].grad(), 1e-10, 1e-12)) << "mode " << mode;
    if (mode == affine) {
      EXPECT_TRUE(all_close(fused_in[1].grad(), comp_in[1].grad(), 1e-10, 1e-12));
    }
    if (mode == frozen_weight) {
      EXPECT_FALSE(fused_in[1].grad().defined());
    }
    if (params) {
      EXPECT_TRUE(all_close(fused_in[2].grad(), comp_in[2].grad(), 1e-10, 1e-12)) << "mode " << mode;
    }
  }
}

// The fused training-mode kernel against the composite of primitives (the
// path statistics summed across replicas take; an identity sum is one
// replica), in f64: values, every gradient and the running statistics.
TEST(Norm, FusedBatchNormEqualsComposite) {
  Generator gen(5);
  const BatchSum one_replica = [](const Tensor& t) { return t; };
  for (const Shape& shape : {Shape{5, 3, 4, 6}, Shape{7, 3}}) {
    for (bool affine : {true, false}) {
      Tensor x = random_tensor(shape, DType::f64, gen, -2, 3);
      Tensor w = random_tensor({3}, DType::f64, gen), b = random_tensor({3}, DType::f64, gen);
      Tensor r = random_tensor(shape, DType::f64, gen);
      std::vector<Tensor> fused_in = {x.clone(), w.clone(), b.clone()}, comp_in = {x.clone(), w.clone(), b.clone()};
      for (auto* v : {&fused_in, &comp_in})
        for (Tensor& t : *v) t.set_requires_grad();
      Tensor fm = Tensor::zeros({3}, DType::f64), fv = Tensor::ones({3}, DType::f64);
      Tensor cm = fm.clone(), cv = fv.clone();
      const Tensor none;
      Tensor yf = batch_norm(fused_in[0], fm, fv, affine ? fused_in[1] : none, affine ? fused_in[2] : none,
                             {.momentum = 0.3});
      Tensor yc = batch_norm(comp_in[0], cm, cv, affine ? comp_in[1] : none, affine ? comp_in[2] : none,
                             {.momentum = 0.3, .across_replicas = one_replica});
      EXPECT_TRUE(all_close(yf, yc, 1e-12, 1e-12)) << to_string(shape);
      EXPECT_TRUE(all_close(fm, cm, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(fv, cv, 1e-12, 1e-12));
      backward(yf, r);
      backward(yc, r);
      EXPECT_TRUE(all_close(fused_in[0].grad(), comp_in[0].grad(), 1e-10, 1e-12)) << to_string(shape);
      if (affine) {
        EXPECT_TRUE(all_close(fused_in[1].grad(), comp_in[1].grad(), 1e-10, 1e-12));
        EXPECT_TRUE(all_close(fused_in[2].grad(), comp_in[2].grad(), 1e-10, 1e-12));
      }
    }
  }
  // f32 with a mean far from zero: the kernel subtracts the mean before
  // scaling, so it keeps the composite's accuracy (both against f64).
  Tensor x = add(random_tensor({8, 2, 5, 5}, DType::f32, gen), 1000.0);
  const Tensor y32 = batch_norm(x, Tensor(), Tensor());
  const Tensor y64 = batch_norm(x.to(DType::f64), Tensor(), Tensor());
  EXPECT_TRUE(all_close(y32.to(DType::f64), y64, 1e-3, 1e-3));
}

TEST(Norm, BatchNormUpdatesRunningStatsWithMomentum) {
  Tensor x = Tensor::from_vector<float>({1, 10, 3, 30}, {2, 2});  // channel 0: {1, 3}, channel 1: {10, 30}
  Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  batch_norm(x, rm, rv, Tensor(), Tensor(), {.momentum = 0.5});
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{1, 10}));  // 0.5 * 0 + 0.5 * mean
  EXPECT_EQ(rv.to_vector<float>(), (std::vector<float>{1.5, 100.5}));  // 0.5 * 1 + 0.5 * unbiased var (2, 200)
  // Eval uses the running statistics.
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), {.training = false, .eps = 0});
  EXPECT_NEAR(y.to_vector<float>()[2], 2 / std::sqrt(1.5), 1e-6);
  EXPECT_THROW(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), {.training = false}), ValueError);
}

// Each output unit's weights have length |g|; a g of another size is refused.
TEST(Norm, WeightNormGivesEachUnitTheLengthG) {
  Generator gen(4);
  Tensor v = random_tensor({3, 2, 2}, DType::f64, gen), g = random_tensor({3}, DType::f64, gen, 0.5, 2);
  const auto w = weight_norm(v, g).to_vector<double>(), gs = g.to_vector<double>();
  for (size_t o = 0; o < 3; ++o) {
    double n = 0;
    for (size_t i = 0; i < 4; ++i) n += w[o * 4 + i] * w[o * 4 + i];
    EXPECT_NEAR(std::sqrt(n), std::abs(gs[o]), 1e-12);
  }
  EXPECT_THROW(weight_norm(v, Tensor::ones({2}, DType::f64)), ValueError);
}

}  // namespace
}  // namespace braid
