// Op-table cases for scaled_dot_product_attention and its backward
// (op_table.h); attention_test.cc covers the geometries, dropout and memory.
#include "braid/ops/attention.h"
#include "braid/ops/registry.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> attention_cases() {
  Generator gen(81);
  // q [B, Tq, Hq, D], k and v [B, Tk, Hkv, D]: two query heads per key-value
  // head, fewer queries than keys, causal.
  const Tensor q = random_tensor({2, 3, 4, 5}, DType::f32, gen, -2, 2);
  const Tensor k = random_tensor({2, 6, 2, 5}, DType::f32, gen, -2, 2);
  const Tensor v = random_tensor({2, 6, 2, 5}, DType::f32, gen, -2, 2);
  const double scale = 0.4;
  const op::Attrs attrs{{"causal", int64_t{1}}, {"scale", scale}, {"dropout", 0.0}, {"generator", int64_t{0}}};
  // PyTorch 1.13 has no F.scaled_dot_product_attention: the same from
  // primitives, the mask aligned bottom-right (query i sees keys <= i + 3).
  const std::string ref =
      "(lambda Q, K, V: (torch.softmax(Q.permute(0, 2, 1, 3) @ K.permute(0, 2, 1, 3).repeat_interleave(2, 1)"
      ".transpose(-1, -2) * 0.4 + torch.full((3, 6), -math.inf, dtype=q.dtype).triu(4), -1)"
      " @ V.permute(0, 2, 1, 3).repeat_interleave(2, 1)).permute(0, 2, 1, 3))";
  std::vector<OpCase> cases;
  cases.push_back({"scaled_dot_product_attention",
                   {ref + "(q, k, v)",
                    {{"q", q}, {"k", k}, {"v", v}},
                    [scale](const auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {.scale = scale}); },
                    {"q", "k", "v"}},
                   "",
                   attrs});
  // The backward op on the forward's outputs; PyTorch differentiates its
  // composite with the same output gradient g (dq compared; dk and dv are the
  // gradients the forward case checks).
  const std::vector<Tensor> fwd = op::call(op::find("scaled_dot_product_attention"), {q, k, v}, attrs);
  const Tensor g = random_tensor(fwd[0].shape(), DType::f32, gen);
  const std::string grad_q =
      "(lambda qq: torch.autograd.grad(" + ref + "(qq, k, v), qq, g)[0])(q.detach().requires_grad_())";
  const op::Attrs backward_attrs{{"causal", int64_t{1}}, {"scale", scale}, {"dropout", 0.0}};
  cases.push_back({"scaled_dot_product_attention_backward",
                   {grad_q,
                    {{"g", g}, {"q", q}, {"k", k}, {"v", v}, {"out", fwd[0]}, {"lse", fwd[1]}, {"rng", fwd[2]}},
                    [backward_attrs](const auto& in) {
                      return op::call(op::find("scaled_dot_product_attention_backward"), in, backward_attrs)[0];
                    },
                    {}},
                   "",
                   backward_attrs});
  return cases;
}

}  // namespace braid::testing
