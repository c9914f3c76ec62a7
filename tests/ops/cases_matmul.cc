// Op-table cases for the matmul and linear families (op_table.h).
#include "braid/ops/linear.h"
#include "braid/ops/matmul.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> matmul_cases() {
  Generator gen(41);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  std::vector<OpCase> cases;
  // 2-D, batched, and each side broadcast over the other's batch (2-D or batch 1).
  const std::vector<std::pair<Shape, Shape>> shapes = {{{7, 5}, {5, 3}},       {{1, 4}, {4, 1}},
                                                       {{4, 6, 5}, {4, 5, 2}}, {{6, 5}, {3, 5, 2}},
                                                       {{3, 6, 5}, {5, 2}},    {{1, 6, 5}, {3, 5, 2}}};
  for (const auto& [sa, sb] : shapes) {
    cases.push_back({"matmul", {"torch.matmul(a, b)", {{"a", r(sa)}, {"b", r(sb)}},
                                [](const auto& v) { return matmul(v[0], v[1]); }, {"a", "b"}}, ""});
  }
  // Strided factors (transposed, step-2 views: copied once for BLAS); swept above.
  for (const auto& [sa, sb] : {shapes[0], shapes[3], shapes[5]}) {
    cases.push_back({"matmul", {"torch.matmul(a, b)", {{"a", strided_copy(r(sa))}, {"b", strided_copy(r(sb))}},
                                [](const auto& v) { return matmul(v[0], v[1]); }, {"a", "b"}},
                     "", {}, false});
  }
  // The backward products, with the factor's gradient summed over the batch
  // where it was broadcast.
  auto grad_a = [](const Shape& shape) {
    return [shape](const std::vector<Tensor>& v) {
      return op::call1(op::find("matmul_backward_a"), {v[0], v[1]}, {{"shape", shape}});
    };
  };
  auto grad_b = [](const Shape& shape) {
    return [shape](const std::vector<Tensor>& v) {
      return op::call1(op::find("matmul_backward_b"), {v[0], v[1]}, {{"shape", shape}});
    };
  };
  cases.push_back({"matmul_backward_a", {"g @ b.transpose(-1, -2)", {{"g", r({4, 6, 2})}, {"b", r({4, 5, 2})}},
                                         grad_a({4, 6, 5}), {}},
                   "", {{"shape", Shape{4, 6, 5}}}});
  cases.push_back({"matmul_backward_a", {"(g @ b.transpose(-1, -2)).sum(0)", {{"g", r({3, 6, 2})}, {"b", r({3, 5, 2})}},
                                         grad_a({6, 5}), {}},
                   "", {{"shape", Shape{6, 5}}}});
  cases.push_back({"matmul_backward_a", {"g @ b.t()", {{"g", r({7, 3})}, {"b", r({5, 3})}}, grad_a({7, 5}), {}},
                   "", {{"shape", Shape{7, 5}}}});
  cases.push_back({"matmul_backward_b", {"(a.transpose(-1, -2) @ g).sum(0, keepdim=True)",
                                         {{"a", r({3, 6, 5})}, {"g", r({3, 6, 2})}}, grad_b({1, 5, 2}), {}},
                   "", {{"shape", Shape{1, 5, 2}}}});
  cases.push_back({"matmul_backward_b", {"a.transpose(-1, -2) @ g", {{"a", r({6, 5})}, {"g", r({3, 6, 2})}},
                                         grad_b({3, 5, 2}), {}},
                   "", {{"shape", Shape{3, 5, 2}}}});
  return cases;
}

std::vector<OpCase> linear_cases() {
  Generator gen(42);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  return {
      {"linear", {"F.linear(x, w, b)", {{"x", r({9, 13})}, {"w", r({10, 13})}, {"b", r({10})}},
                  [](const auto& v) { return linear(v[0], v[1], v[2]); }, {"x", "w", "b"}}, ""},
      {"linear", {"F.linear(x, w, b)", {{"x", r({2, 5, 7})}, {"w", r({3, 7})}, {"b", r({3})}},
                  [](const auto& v) { return linear(v[0], v[1], v[2]); }, {"x", "w", "b"}}, ""},
      // A layer's size; finite differences over it would take seconds, and the
      // small cases check the same gradient code.
      {"linear", {"F.linear(x, w, b)", {{"x", r({64, 78})}, {"w", r({25, 78})}, {"b", r({25})}},
                  [](const auto& v) { return linear(v[0], v[1], v[2]); }, {"x", "w", "b"}},
       "", {}, true, false},
      {"linear", {"F.linear(x, w, b)", {{"x", r({1, 4})}, {"w", r({1, 4})}, {"b", r({1})}},
                  [](const auto& v) { return linear(v[0], v[1], v[2]); }, {"x", "w", "b"}}, ""},
      // Strided x and w (swept above).
      {"linear", {"F.linear(x, w, b)", {{"x", strided_copy(r({9, 13}))}, {"w", strided_copy(r({10, 13}))}, {"b", r({10})}},
                  [](const auto& v) { return linear(v[0], v[1], v[2]); }, {"x", "w", "b"}},
       "", {}, false},
      // Without a bias the op's third input is absent: not the case's inputs.
      {"linear", {"F.linear(x, w)", {{"x", r({6, 8})}, {"w", r({5, 8})}},
                  [](const auto& v) { return linear(v[0], v[1]); }, {"x", "w"}},
       "", {}, false},
      {"linear_backward_bias", {"g.sum(dim=(0, 1))", {{"g", r({2, 5, 3})}},
                                [](const auto& v) { return op::call1(op::find("linear_backward_bias"), {v[0]}); }, {}}, ""},
  };
}

}  // namespace braid::testing
