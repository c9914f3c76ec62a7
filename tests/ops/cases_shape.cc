// Op-table cases for the shape family (op_table.h).
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "op_table.h"

namespace braid::testing {

namespace {

using Ints = std::vector<int64_t>;

OpCase view(const char* op, const char* expr, Fn fn, Tensor x, op::Attrs attrs) {
  return {op, {expr, {{"x", x}}, std::move(fn), {"x"}}, "", std::move(attrs)};
}

// A composite written in the op: the dtype sweep has no inputs of the op's own.
OpCase composite(const char* op, const char* expr, Fn fn, std::vector<std::pair<std::string, Tensor>> inputs,
                 std::vector<std::string> grad) {
  return {op, {expr, std::move(inputs), std::move(fn), std::move(grad)}, "", {}, false};
}

}  // namespace

std::vector<OpCase> shape_cases() {
  Generator gen(21);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  const Tensor x = r({3, 4, 5});
  const Tensor ones = r({3, 1, 5, 1});
  std::vector<OpCase> cases{
      view("reshape", "x.reshape(-1, 5)", [](const auto& v) { return reshape(v[0], {-1, 5}); }, x, {{"shape", Ints{12, 5}}}),
      view("reshape", "x.flatten(1)", [](const auto& v) { return flatten(v[0], 1); }, x, {{"shape", Ints{3, 20}}}),
      // Merging dims of a slice that stay evenly strided: still a view.
      composite("reshape", "x[:, :, 0:4:2].reshape(-1, 2)",
                [](const auto& v) { return reshape(slice(v[0], 2, 0, 4, 2), {-1, 2}); }, {{"x", x}}, {"x"}),
      view("permute", "x.permute(1, 2, 0)", [](const auto& v) { return permute(v[0], {1, 2, 0}); }, x,
           {{"dims", Ints{1, 2, 0}}}),
      view("permute", "x.transpose(0, 2)", [](const auto& v) { return transpose(v[0], 0, 2); }, x,
           {{"dims", Ints{2, 1, 0}}}),
      view("slice", "x[:, 1:4:2]", [](const auto& v) { return slice(v[0], 1, 1, 4, 2); }, x,
           {{"dim", 1}, {"start", 1}, {"end", 4}, {"step", 2}}),
      // Negative start, end past the size: clamped as Python slicing.
      view("slice", "x[..., -3:]", [](const auto& v) { return slice(v[0], -1, -3, 1000); }, x,
           {{"dim", -1}, {"start", -3}, {"end", 1000}, {"step", 1}}),
      composite("slice", "x.split(2, 1)[1]", [](const auto& v) { return split(v[0], 2, 1)[1]; }, {{"x", x}}, {"x"}),
      composite("slice", "x.split([1, 3], 1)[1]", [](const auto& v) { return split(v[0], Ints{1, 3}, 1)[1]; },
                {{"x", x}}, {"x"}),
      {"slice_backward", {"torch.ops.aten.slice_backward(g, [3, 4, 5], 1, 1, 4, 2)", {{"g", r({3, 2, 5})}},
                          [](const auto& v) {
                            return op::call1(op::find("slice_backward"), {v[0]},
                                             {{"dim", 1}, {"start", 1}, {"end", 4}, {"step", 2}, {"shape", Ints{3, 4, 5}}});
                          }, {"g"}},
       "", {{"dim", 1}, {"start", 1}, {"end", 4}, {"step", 2}, {"shape", Ints{3, 4, 5}}}},
      view("expand", "x.expand(2, 3, 4, 5)", [](const auto& v) { return expand(v[0], {2, 3, 4, 5}); }, r({3, 1, 5}),
           {{"shape", Ints{2, 3, 4, 5}}}),
      composite("expand", "x.unsqueeze(1).expand(-1, 2, -1, -1)",
                [](const auto& v) { return expand(unsqueeze(v[0], 1), {-1, 2, -1, -1}); }, {{"x", x}}, {"x"}),
      view("squeeze", "x.squeeze()", [](const auto& v) { return squeeze(v[0]); }, ones, {{"dims", Ints{1, 3}}}),
      view("squeeze", "x.squeeze(-1)", [](const auto& v) { return squeeze(v[0], -1); }, ones, {{"dims", Ints{-1}}}),
      view("unsqueeze", "x.unsqueeze(-1)", [](const auto& v) { return unsqueeze(v[0], -1); }, x, {{"dim", -1}}),
      view("unsqueeze", "x.unsqueeze(1)", [](const auto& v) { return unsqueeze(v[0], 1); }, x, {{"dim", 1}}),
      {"concat", {"torch.cat([a, b, c], 1)", {{"a", x}, {"b", r({3, 2, 5})}, {"c", r({3, 1, 5})}},
                  [](const auto& v) { return concat({v[0], v[1], v[2]}, 1); }, {"a", "b", "c"}},
       "", {{"dim", 1}}},
      {"concat", {"torch.cat([a, b], -1)", {{"a", r({2, 3})}, {"b", r({2, 4})}},
                  [](const auto& v) { return concat({v[0], v[1]}, -1); }, {"a", "b"}},
       "", {{"dim", -1}}},
      composite("concat", "torch.stack([a, b], -1)", [](const auto& v) { return stack({v[0], v[1]}, -1); },
                {{"a", x}, {"b", r({3, 4, 5})}}, {"a", "b"}),
      composite("concat", "torch.stack([a, a * 10], 0)", [](const auto& v) { return stack({v[0], v[0] * 10.0}, 0); },
                {{"a", r({2, 2})}}, {"a"}),
  };
  // contiguous() is clone() of a strided tensor (the tensor cases sweep clone).
  cases.push_back(composite("clone", "x.contiguous()", [](const auto& v) { return contiguous(v[0]); },
                            {{"x", strided_copy(x)}}, {"x"}));
  // A strided input no view can reshape: reshape copies first.
  cases.push_back(composite("reshape", "x.reshape(12, 5)", [](const auto& v) { return reshape(v[0], {12, 5}); },
                            {{"x", strided_copy(x)}}, {"x"}));
  return cases;
}

}  // namespace braid::testing
