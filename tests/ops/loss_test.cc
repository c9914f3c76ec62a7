// Losses: the fused cross-entropy against the composite log_softmax + nll
// (docs/design.md, "Composite ops are written in primitives"), finite
// differences, and PyTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/loss.h"
#include "braid/ops/softmax.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::expect_matches_torch;
using testing::OpCheck;
using testing::random_index;
using testing::random_tensor;
using testing::strided_copy;
using testing::Fn;
using testing::leaf;

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

TEST(Loss, Gradcheck) {
  Generator gen(2);
  Tensor x = leaf(random_tensor({5, 4}, DType::f64, gen, -3, 3));
  Tensor t = random_index({5}, 4, gen);
  Tensor y = leaf(random_tensor({5, 4}, DType::f64, gen, 0, 1));
  auto check = [](const Fn& fn, const std::vector<Tensor>& in, const char* what) {
    auto r = autograd::gradcheck(fn, in);
    EXPECT_TRUE(r.ok) << what << "\n" << r.report;
  };
  check([t](const auto& in) { return cross_entropy(in[0], t); }, {x}, "cross_entropy");
  check([t](const auto& in) { return nll_loss(in[0], t); }, {x}, "nll_loss");
  check([](const auto& in) { return mse_loss(in[0], in[1]); }, {x, y}, "mse_loss");
  check([](const auto& in) { return bce_with_logits(in[0], in[1]); }, {x, y}, "bce_with_logits");
  Tensor s = leaf(strided_copy(random_tensor({6, 3}, DType::f64, gen)));
  Tensor ts = random_index({6}, 3, gen);
  check([ts](const auto& in) { return cross_entropy(in[0], ts); }, {s}, "cross_entropy strided");
}

TEST(Loss, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(3);
  std::vector<OpCheck> checks;
  for (const Shape& shape : {Shape{8, 10}, Shape{1, 3}, Shape{33, 7}}) {
    Tensor x = random_tensor(shape, DType::f32, gen, -4, 4);
    Tensor t = random_index({shape[0]}, shape[1], gen);
    Tensor y = random_tensor(shape, DType::f32, gen, 0, 1);
    checks.push_back({"F.cross_entropy(x, t)", {{"x", x}, {"t", t}},
                      [](const auto& in) { return cross_entropy(in[0], in[1]); }, {"x"}});
    checks.push_back({"F.cross_entropy(x, t)", {{"x", strided_copy(x)}, {"t", t}},
                      [](const auto& in) { return cross_entropy(in[0], in[1]); }, {"x"}});
    checks.push_back({"F.nll_loss(F.log_softmax(x, 1), t)", {{"x", x}, {"t", t}},
                      [](const auto& in) { return nll_loss(log_softmax(in[0], 1), in[1]); }, {"x"}});
    checks.push_back({"F.nll_loss(x, t)", {{"x", x}, {"t", t}},
                      [](const auto& in) { return nll_loss(in[0], in[1]); }, {"x"}});
    checks.push_back({"F.mse_loss(x, y)", {{"x", strided_copy(x)}, {"y", y}},
                      [](const auto& in) { return mse_loss(in[0], in[1]); }, {"x", "y"}});
    checks.push_back({"F.binary_cross_entropy_with_logits(x, y)", {{"x", x}, {"y", strided_copy(y)}},
                      [](const auto& in) { return bce_with_logits(in[0], in[1]); }, {"x", "y"}});
  }
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
