// Op-table cases for the norm family (op_table.h). batch_norm and
// weight_norm are composites of other families' ops; norm_test.cc checks them.
#include "braid/ops/norm.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> norm_cases() {
  Generator gen(31);
  const Tensor x = random_tensor({6, 4, 5, 3}, DType::f32, gen, -2, 3);
  const Tensor w = random_tensor({5, 3}, DType::f32, gen), b = random_tensor({5, 3}, DType::f32, gen);
  const Tensor g = random_tensor({6, 4, 5, 3}, DType::f32, gen);
  const op::Attrs attrs{{"normalized_shape", Shape{5, 3}}, {"eps", 1e-5}};
  const op::Attrs last{{"normalized_shape", Shape{3}}, {"eps", 1e-5}};
  // The forward's statistics, as the backward op reads them.
  const Tensor stats = op::call(op::find("layer_norm"), {x, w, b}, attrs)[1];
  const Tensor running = random_tensor({4}, DType::f32, gen), batch = random_tensor({1, 4, 1, 1}, DType::f32, gen);
  return {
      {"layer_norm", {"F.layer_norm(x, (5, 3), w, b)", {{"x", x}, {"w", w}, {"b", b}},
                      [](const auto& v) { return layer_norm(v[0], {5, 3}, v[1], v[2]); }, {"x", "w", "b"}},
       "", attrs},
      // A strided input (swept above).
      {"layer_norm", {"F.layer_norm(x, (5, 3), w, b)", {{"x", strided_copy(x)}, {"w", w}, {"b", b}},
                      [](const auto& v) { return layer_norm(v[0], {5, 3}, v[1], v[2]); }, {"x", "w", "b"}},
       "", attrs, false},
      // No affine parameters: the op's weight and bias inputs are absent, so
      // the case's inputs are not the op's (the affine case sweeps dtypes).
      {"layer_norm", {"F.layer_norm(x, (3,))", {{"x", x}}, [](const auto& v) { return layer_norm(v[0], {3}); }, {"x"}},
       "", last, false},
      {"layer_norm_backward",
       {"torch.autograd.grad(F.layer_norm(x.requires_grad_(), (5, 3), w), x, g)[0]",
        {{"g", g}, {"x", x}, {"w", w}, {"stats", stats}},
        [](const auto& v) {
          return op::call(op::find("layer_norm_backward"), std::span<const Tensor>(v),
                          {{"normalized_shape", Shape{5, 3}}, {"weight_grad", 1}})[0];
        },
        {}},
       "", {{"normalized_shape", Shape{5, 3}}, {"weight_grad", 1}}},
      // Output 1: g * xhat per row, which the backward rule sums into the
      // weight's gradient. (The case above sweeps the same call.)
      {"layer_norm_backward",
       {"g.reshape(24, 15) * F.layer_norm(x, (5, 3)).reshape(24, 15)",
        {{"g", g}, {"x", x}, {"w", w}, {"stats", stats}},
        [](const auto& v) {
          return op::call(op::find("layer_norm_backward"), std::span<const Tensor>(v),
                          {{"normalized_shape", Shape{5, 3}}, {"weight_grad", 1}})[1];
        },
        {}},
       "", {}, false},
      {"batch_norm_running_update_",
       {"0.7 * r + (0.3 * 1.5) * s.reshape(-1)", {{"r", running}, {"s", batch}},
        [](const auto& v) {
          Tensor r = v[0].clone();
          op::call(op::find("batch_norm_running_update_"), {r, v[1]}, {{"momentum", 0.3}, {"scale", 1.5}});
          return r;
        },
        {}},
       "", {{"momentum", 0.3}, {"scale", 1.5}}},
  };
}

}  // namespace braid::testing
