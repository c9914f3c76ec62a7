// Losses: what the op table (cases_loss.cc) cannot express — a closed form,
// the fused cross-entropy against the composite log_softmax + nll
// (docs/design.md, "Composite ops are written in primitives"), and the
// targets' checks.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/ops/loss.h"
#include "braid/ops/softmax.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::leaf;
using testing::random_index;
using testing::random_tensor;

TEST(Loss, CrossEntropyOfUniformLogitsIsLogC) {
  Tensor x = Tensor::zeros({3, 10});
  Tensor t = Tensor::from_vector<int64_t>({0, 9, 4}, {3});
  EXPECT_NEAR(cross_entropy(x, t).item(), std::log(10.0), 1e-6);
  EXPECT_EQ(cross_entropy(x, t).ndim(), 0);
}

TEST(Loss, FusedCrossEntropyEqualsComposite) {
  Generator gen(1);
  for (const Shape& shape : {Shape{1, 2}, Shape{7, 5}, Shape{64, 10}, Shape{3, 1000}}) {
    Tensor x = random_tensor(shape, DType::f64, gen, -5, 5);
    Tensor t = random_index({shape[0]}, shape[1], gen);
    Tensor a = leaf(x.clone()), b = leaf(x.clone());
    Tensor fused = cross_entropy(a, t);
    Tensor composite = nll_loss(log_softmax(b, 1), t);
    EXPECT_NEAR(fused.item(), composite.item(), 1e-12) << to_string(shape);
    backward(fused);
    backward(composite);
    EXPECT_TRUE(all_close(a.grad(), b.grad(), 1e-12, 1e-14)) << to_string(shape);
  }
}

TEST(Loss, TargetsAreChecked) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(cross_entropy(x, Tensor::from_vector<int64_t>({0, 3}, {2})), IndexError);
  EXPECT_THROW(nll_loss(x, Tensor::from_vector<int64_t>({-1, 0}, {2})), IndexError);
  EXPECT_THROW(cross_entropy(x, Tensor::zeros({2}, DType::i32)), ValueError);
  EXPECT_THROW(nll_loss(x, Tensor::zeros({2, 1}, DType::i64)), ValueError);
  EXPECT_THROW(bce_with_logits(x, Tensor::zeros({2, 3}, DType::f64)), ValueError);
  EXPECT_THROW(bce_with_logits(x, Tensor::zeros({3, 2})), ValueError);
}

}  // namespace
}  // namespace braid
