// Op-table cases for softmax and log_softmax (op_table.h).
#include "braid/ops/softmax.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> softmax_cases() {
  Generator gen(51);
  const Tensor x = random_tensor({4, 6, 5}, DType::f32, gen, -4, 4);
  const Tensor s = strided_copy(random_tensor({3, 7, 9}, DType::f32, gen, -4, 4));
  const Tensor wide = random_tensor({8, 1000}, DType::f32, gen, -10, 10);
  std::vector<OpCase> cases;
  for (bool log : {false, true}) {
    const char* op = log ? "log_softmax" : "softmax";
    auto add = [&](const Tensor& t, int64_t dim, bool gradcheck) {
      OpCase c{op, {fmt::format("F.{}(x, {})", op, dim), {{"x", t}},
                    [log, dim](const auto& v) { return log ? log_softmax(v[0], dim) : softmax(v[0], dim); }, {"x"}},
               "", {{"dim", dim}}};
      c.gradcheck = gradcheck;
      cases.push_back(std::move(c));
    };
    for (int64_t dim : {0, 1, 2, -1}) add(x, dim, true);
    add(s, 1, true);
    // 8000 elements: finite differences are slow; PyTorch checks the gradient.
    add(wide, -1, false);

    // The backward kernels take any gradient and output y.
    const std::string expr = log ? "g - torch.exp(y) * g.sum(1, keepdim=True)" : "y * (g - (g * y).sum(1, keepdim=True))";
    const std::string backward = std::string(op) + "_backward";
    const Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    cases.push_back({backward, {expr, {{"g", random_tensor({4, 6, 5}, DType::f32, gen)}, {"y", y}},
                                [backward](const auto& v) { return op::call1(op::find(backward), {v[0], v[1]}, {{"dim", 1}}); },
                                {}},
                     "", {{"dim", 1}}});
  }
  return cases;
}

}  // namespace braid::testing
