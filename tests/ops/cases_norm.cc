// Op-table cases for the norm family (op_table.h).
#include "braid/ops/norm.h"
#include "op_table.h"

namespace braid::testing {

namespace {

// The eager batch_norm in eval mode and weight_norm are composites of other
// families' ops, labelled by the op that normalises (div, mul; batch_norm in
// training mode runs the fused op, labelled so too); the dtype sweep is the
// ops' own.
OpCase composite(const char* op, OpCheck check) {
  OpCase c{op, std::move(check)};
  c.sweep = false;
  return c;
}

}  // namespace

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
  std::vector<OpCase> cases{
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

  // The fused training-mode op and its backward, called directly (the eager
  // batch_norm below calls them in training mode).
  const Tensor cw = random_tensor({4}, DType::f32, gen), cb = random_tensor({4}, DType::f32, gen);
  const op::Attrs eps{{"eps", 1e-5}};
  const Tensor bn_stats = op::call(op::find("batch_norm"), {x, cw, cb}, eps)[1];
  cases.push_back({"batch_norm",
                   {"F.batch_norm(x, None, None, w, b, training=True)", {{"x", x}, {"w", cw}, {"b", cb}},
                    [](const auto& v) { return op::call(op::find("batch_norm"), std::span<const Tensor>(v),
                                                        {{"eps", 1e-5}})[0]; },
                    {"x", "w", "b"}},
                   "", eps});
  auto bn_backward = [](int output) {
    return [output](const std::vector<Tensor>& v) {
      return op::call(op::find("batch_norm_backward"), std::span<const Tensor>(v))[output];
    };
  };
  cases.push_back({"batch_norm_backward",
                   {"torch.autograd.grad(F.batch_norm(x.requires_grad_(), None, None, w, None, training=True), x, g)[0]",
                    {{"g", g}, {"x", x}, {"w", cw}, {"stats", bn_stats}},
                    bn_backward(0),
                    {}},
                   ""});
  // Output 1: sum(g) and sum(g * xhat) per channel (the gradients of bias and weight).
  cases.push_back({"batch_norm_backward",
                   {"torch.stack([g.sum((0, 2, 3)), (g * F.batch_norm(x, None, None, training=True)).sum((0, 2, 3))])",
                    {{"g", g}, {"x", x}, {"w", cw}, {"stats", bn_stats}},
                    bn_backward(1),
                    {}},
                   "", {}, false});

  // batch_norm: training (batch statistics) and eval (running statistics),
  // on contiguous and strided inputs.
  const Tensor rm = random_tensor({4}, DType::f32, gen), rv = random_tensor({4}, DType::f32, gen, 0.5, 2);
  for (const Tensor& t : {x, strided_copy(x)}) {
    cases.push_back(composite("div", {"F.batch_norm(x, None, None, w, b, training=True)",
                                      {{"x", t}, {"w", cw}, {"b", cb}},
                                      [](const auto& v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2]); },
                                      {"x", "w", "b"}}));
    cases.push_back(composite("div", {"F.batch_norm(x, m, v, w, b, training=False)",
                                      {{"x", t}, {"m", rm}, {"v", rv}, {"w", cw}, {"b", cb}},
                                      [](const auto& v) {
                                        return batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = false});
                                      },
                                      {"x", "w", "b"}}));
  }
  // The running statistics after one training step, through the in-place
  // op (updated copies, so the oracle still sees the originals).
  for (int which : {1, 2}) {
    cases.push_back(composite("batch_norm_running_update_",
                              {fmt::format("(F.batch_norm(x, m, v, training=True, momentum=0.3), m, v)[{}]", which),
                               {{"x", x}, {"m", rm}, {"v", rv}},
                               [which](const auto& v) {
                                 Tensor m = v[1].clone(), var = v[2].clone();
                                 batch_norm(v[0], m, var, Tensor(), Tensor(), {.momentum = 0.3});
                                 return which == 1 ? m : var;
                               },
                               {}}));
  }
  // Weight normalisation against torch._weight_norm (what
  // nn.utils.weight_norm computes), g as [out, 1, ...] or [out].
  const Tensor v2 = random_tensor({4, 6}, DType::f32, gen), g2 = random_tensor({4, 1}, DType::f32, gen, 0.5, 2);
  const Tensor v4 = random_tensor({3, 2, 3, 3}, DType::f32, gen);
  const Tensor g4 = random_tensor({3, 1, 1, 1}, DType::f32, gen, 0.5, 2);
  for (const auto& [v, g] : {std::pair{v2, g2}, std::pair{v4, g4}}) {
    cases.push_back(composite("mul", {"torch._weight_norm(v, g, 0)", {{"v", v}, {"g", g}},
                                      [](const auto& in) { return weight_norm(in[0], in[1]); }, {"v", "g"}}));
  }
  cases.push_back(composite("mul", {"torch._weight_norm(v, g.reshape(3, 1, 1), 0)",
                                    {{"v", random_tensor({3, 2, 2}, DType::f32, gen)},
                                     {"g", random_tensor({3}, DType::f32, gen, 0.5, 2)}},
                                    [](const auto& in) { return weight_norm(in[0], in[1]); }, {"v", "g"}}));
  return cases;
}

}  // namespace braid::testing
