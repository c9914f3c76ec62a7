// Op-table cases for the losses (op_table.h).
#include "braid/ops/loss.h"
#include "braid/ops/softmax.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> loss_cases() {
  Generator gen(61);
  std::vector<OpCase> cases;
  for (const Shape& shape : {Shape{8, 10}, Shape{1, 3}, Shape{33, 7}}) {
    const Tensor x = random_tensor(shape, DType::f32, gen, -4, 4);
    const Tensor t = random_index({shape[0]}, shape[1], gen);
    const Tensor y = random_tensor(shape, DType::f32, gen, 0, 1);
    cases.push_back({"cross_entropy", {"F.cross_entropy(x, t)", {{"x", x}, {"t", t}},
                                       [](const auto& v) { return cross_entropy(v[0], v[1]); }, {"x"}}});
    cases.push_back({"nll_loss", {"F.nll_loss(x, t)", {{"x", x}, {"t", t}},
                                  [](const auto& v) { return nll_loss(v[0], v[1]); }, {"x"}}});
    // mse_loss is written in sub, mul and mean: no inputs of one op to sweep.
    cases.push_back({"mean", {"F.mse_loss(x, y)", {{"x", x}, {"y", y}},
                              [](const auto& v) { return mse_loss(v[0], v[1]); }, {"x", "y"}},
                     "", {}, false});
    cases.push_back({"bce_with_logits", {"F.binary_cross_entropy_with_logits(x, y)", {{"x", x}, {"y", y}},
                                         [](const auto& v) { return bce_with_logits(v[0], v[1]); }, {"x", "y"}}});
  }
  // The composite cross-entropy: log_softmax then nll_loss (no one op's inputs).
  const Tensor x = random_tensor({8, 10}, DType::f32, gen, -4, 4);
  const Tensor t = random_index({8}, 10, gen);
  const Tensor y = random_tensor({8, 10}, DType::f32, gen, 0, 1);
  cases.push_back({"nll_loss", {"F.nll_loss(F.log_softmax(x, 1), t)", {{"x", x}, {"t", t}},
                                [](const auto& v) { return nll_loss(log_softmax(v[0], 1), v[1]); }, {"x"}},
                   "", {}, false});
  // Strided logits and targets, gradients compared with PyTorch's.
  cases.push_back({"cross_entropy", {"F.cross_entropy(x, t)", {{"x", strided_copy(x)}, {"t", t}},
                                     [](const auto& v) { return cross_entropy(v[0], v[1]); }, {"x"}}});
  cases.push_back({"bce_with_logits", {"F.binary_cross_entropy_with_logits(x, y)", {{"x", x}, {"y", strided_copy(y)}},
                                       [](const auto& v) { return bce_with_logits(v[0], v[1]); }, {"x", "y"}}});
  cases.push_back({"mean", {"F.mse_loss(x, y)", {{"x", strided_copy(x)}, {"y", y}},
                            [](const auto& v) { return mse_loss(v[0], v[1]); }, {"x", "y"}},
                   "", {}, false});

  // The backward kernels: a 0-d gradient and the saved tensors.
  const Tensor g = random_tensor({}, DType::f32, gen, 0.5, 2);
  cases.push_back({"cross_entropy_backward",
                   {"(torch.exp(lp) - F.one_hot(t, 10).to(lp.dtype)) * g / 8", {{"g", g}, {"lp", log_softmax(x, 1)}, {"t", t}},
                    [](const auto& v) { return op::call1(op::find("cross_entropy_backward"), {v[0], v[1], v[2]}); }, {}}});
  cases.push_back({"bce_with_logits_backward",
                   {"(torch.sigmoid(x) - y) * g / 80", {{"g", g}, {"x", x}, {"y", y}},
                    [](const auto& v) { return op::call1(op::find("bce_with_logits_backward"), {v[0], v[1], v[2]}); },
                    {}}});
  return cases;
}

}  // namespace braid::testing
