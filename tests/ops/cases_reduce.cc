// Op-table cases for the reductions (op_table.h).
#include "braid/ops/reduce.h"
#include "op_table.h"

namespace braid::testing {

namespace {

using Ints = std::vector<int64_t>;

op::Attrs dims(Ints d, bool keepdim = false) { return {{"dims", std::move(d)}, {"keepdim", int64_t{keepdim}}}; }
op::Attrs dim(int64_t d, bool keepdim = false) { return {{"dim", d}, {"keepdim", int64_t{keepdim}}}; }

OpCase reduce(const char* op, const char* expr, Fn fn, Tensor x, op::Attrs attrs, bool differentiable = true) {
  return {op, {expr, {{"x", x}}, std::move(fn), differentiable ? std::vector<std::string>{"x"} : std::vector<std::string>{}},
          "", std::move(attrs)};
}

// Written in the op (var, the all-element max and argmax): the dtype sweep
// has no inputs of the op's own.
OpCase composite(const char* op, const char* expr, Fn fn, Tensor x, bool differentiable = true) {
  OpCase c = reduce(op, expr, std::move(fn), std::move(x), {}, differentiable);
  c.sweep = false;
  return c;
}

}  // namespace

std::vector<OpCase> reduce_cases() {
  Generator gen(31);
  const Tensor x = random_tensor({4, 5, 6}, DType::f32, gen);
  const Tensor s = strided_copy(random_tensor({7, 3, 8}, DType::f32, gen));
  const Tensor big = random_tensor({300, 70}, DType::f32, gen);  // long rows and columns
  std::vector<OpCase> cases{
      reduce("sum", "x.sum()", [](const auto& v) { return sum(v[0]); }, x, dims({0, 1, 2})),
      reduce("sum", "x.sum(0)", [](const auto& v) { return sum(v[0], {0}); }, x, dims({0})),
      reduce("sum", "x.sum(-1, keepdim=True)", [](const auto& v) { return sum(v[0], {-1}, true); }, x, dims({-1}, true)),
      // Dims 0 and 2 are not one run: reduced through a permuted copy.
      reduce("sum", "x.sum((0, 2))", [](const auto& v) { return sum(v[0], {0, 2}); }, x, dims({0, 2})),
      reduce("sum", "x.sum((0, 2))", [](const auto& v) { return sum(v[0], {0, 2}); }, s, dims({0, 2})),
      reduce("mean", "x.mean()", [](const auto& v) { return mean(v[0]); }, x, dims({0, 1, 2})),
      reduce("mean", "x.mean(-1)", [](const auto& v) { return mean(v[0], {-1}); }, x, dims({-1})),
      reduce("mean", "x.mean((-1, 0), keepdim=True)", [](const auto& v) { return mean(v[0], {-1, 0}, true); }, s,
             dims({-1, 0}, true)),
      reduce("max", "x.max(1)[0]", [](const auto& v) { return max(v[0], 1).values; }, x, dim(1)),
      reduce("max", "x.max(0, keepdim=True)[0]", [](const auto& v) { return max(v[0], 0, true).values; }, s,
             dim(0, true)),
      reduce("max", "x.max(-1)[1]", [](const auto& v) { return max(v[0], -1).indices; }, x, dim(-1), false),
      reduce("argmax", "x.argmax(-1)", [](const auto& v) { return argmax(v[0], -1); }, x, dim(-1), false),
      reduce("argmax", "x.argmax(0, keepdim=True)", [](const auto& v) { return argmax(v[0], 0, true); }, s,
             dim(0, true), false),
      composite("max", "x.max()", [](const auto& v) { return max(v[0]); }, x),
      composite("argmax", "x.argmax()", [](const auto& v) { return argmax(v[0]); }, s, false),
      composite("sum", "x.var(1)", [](const auto& v) { return var(v[0], {1}); }, x),
      composite("sum", "x.var()", [](const auto& v) { return var(v[0]); }, s),
      composite("sum", "x.var((0, 2), unbiased=False, keepdim=True)",
                [](const auto& v) { return var(v[0], {0, 2}, false, true); }, x),
  };
  // Long rows and columns (the threaded paths). Finite differences over 21000
  // elements are slow; PyTorch checks these gradients.
  for (OpCase c : {reduce("sum", "x.sum(0)", [](const auto& v) { return sum(v[0], {0}); }, big, dims({0})),
                   reduce("mean", "x.mean(1)", [](const auto& v) { return mean(v[0], {1}); }, big, dims({1})),
                   reduce("max", "x.max(0)[0]", [](const auto& v) { return max(v[0], 0).values; }, big, dim(0)),
                   reduce("max", "x.max(-1)[0]", [](const auto& v) { return max(v[0], -1).values; }, big, dim(-1))}) {
    c.gradcheck = false;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace braid::testing
