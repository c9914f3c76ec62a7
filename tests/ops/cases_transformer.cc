// Op-table cases for the decoder-block ops (op_table.h): rms_norm, rotary
// embeddings and the SwiGLU gate, against their definitions written in torch.
#include "braid/ops/transformer.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> transformer_cases() {
  Generator gen(47);
  const Tensor x = random_tensor({4, 3, 8}, DType::f32, gen, -2, 2);
  const Tensor w = random_tensor({8}, DType::f32, gen, 0.5, 1.5);
  const Tensor g = random_tensor({4, 3, 8}, DType::f32, gen);
  const op::Attrs eps{{"eps", 1e-6}};
  const Tensor rstd = op::call(op::find("rms_norm"), {x, w}, eps)[1];
  const char* rms = "x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)";
  // [B, T, H, D] = [2, 5, 3, 8] at positions 3..7, base 10000.
  const Tensor q = random_tensor({2, 5, 3, 8}, DType::f32, gen);
  const std::string angles =
      "((torch.arange(5, dtype=torch.float64) + 3)[:, None, None] * "
      "10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))";
  const std::string rotate =
      "(lambda a: x * torch.cat([a.cos(), a.cos()], -1).to(x.dtype) + torch.cat([-x[..., 4:], x[..., :4]], -1) * "
      "torch.cat([a.sin(), a.sin()], -1).to(x.dtype))(" + angles + ")";
  const op::Attrs at3{{"offset", int64_t{3}}, {"theta", 10000.0}, {"inverse", int64_t{0}}};
  const Tensor h = random_tensor({4, 3, 12}, DType::f32, gen, -3, 3);
  const Tensor gh = random_tensor({4, 3, 6}, DType::f32, gen);
  return {
      {"rms_norm", {std::string(rms) + " * w", {{"x", x}, {"w", w}},
                    [](const auto& v) { return rms_norm(v[0], v[1]); }, {"x", "w"}},
       "", eps},
      {"rms_norm", {rms, {{"x", strided_copy(x)}}, [](const auto& v) { return rms_norm(v[0]); }, {"x"}}, "", eps,
       false},
      {"rms_norm_backward",
       {"torch.autograd.grad(x.requires_grad_() * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, x, g)[0]",
        {{"g", g}, {"x", x}, {"w", w}, {"rstd", rstd}},
        [](const auto& v) {
          return op::call(op::find("rms_norm_backward"), std::span<const Tensor>(v), {{"weight_grad", 1}})[0];
        },
        {}},
       "", {{"weight_grad", 1}}},
      {"rms_norm_backward",
       {std::string("g * ") + rms, {{"g", g}, {"x", x}, {"w", w}, {"rstd", rstd}},
        [](const auto& v) {
          return op::call(op::find("rms_norm_backward"), std::span<const Tensor>(v), {{"weight_grad", 1}})[1];
        },
        {}},
       "", {}, false},
      {"rotary_embedding",
       {rotate, {{"x", q}}, [](const auto& v) { return rotary_embedding(v[0], 3, 10000); }, {"x"}}, "", at3},
      {"rotary_embedding",
       {rotate, {{"x", strided_copy(q)}}, [](const auto& v) { return rotary_embedding(v[0], 3, 10000); }, {"x"}}, "",
       at3, false},
      {"swiglu", {"F.silu(h[..., :6]) * h[..., 6:]", {{"h", h}}, [](const auto& v) { return swiglu(v[0]); }, {"h"}}},
      {"swiglu_backward",
       {"torch.autograd.grad(F.silu(h.requires_grad_()[..., :6]) * h[..., 6:], h, g)[0]", {{"g", gh}, {"h", h}},
        [](const auto& v) { return op::call1(op::find("swiglu_backward"), {v[0], v[1]}); }, {}}},
  };
}

}  // namespace braid::testing
