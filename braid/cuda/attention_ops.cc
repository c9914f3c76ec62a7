// CUDA kernels of scaled_dot_product_attention and its backward
// (braid/ops/attention.cc): the CPU op's attributes, outputs and errors, f32
// and f64, attention_kernels.cu underneath. The dropout generator is read and
// advanced on the host as the CPU kernel does (its words per call), so a
// seeded run draws the same mask on either device; the mask's Philox state
// travels to the backward in the forward's third output, a device i64 [3].
#include <cmath>

#include "braid/base/error.h"
#include "braid/cuda/attention_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/ops/dropout.h"
#include "braid/tensor/cpu/attention.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

AttentionShape shape_of(const Args& a, const Tensor& q, const Tensor& k, const char* op) {
  const AttentionShape s{.b = q.size(0), .tq = q.size(1), .tk = k.size(1), .hq = q.size(2), .hkv = k.size(2),
                         .d = q.size(3), .causal = a.attrs.b("causal"), .scale = a.attrs.f("scale"),
                         .dropout = a.attrs.f("dropout")};
  if (!(s.dropout >= 0 && s.dropout <= 1)) fail<ValueError>("{}: dropout must be in [0, 1], got {}", op, s.dropout);
  if (!std::isfinite(s.scale)) fail<ValueError>("{}: scale must be finite, got {}", op, s.scale);
  if (s.d > kMaxHeadDim) {
    fail<ValueError>("{}: head dim {} is over the device kernel's {} (q {})", op, s.d, kMaxHeadDim,
                     to_string(q.shape()));
  }
  return s;
}

AttentionOperand operand(const Tensor& t) {
  const Shape& st = t.strides();
  return {t.raw_data(), st[0], st[1], st[2], st[3]};
}

Outputs forward(const Args& a) {
  constexpr const char* op = "scaled_dot_product_attention";
  infer(op, a);  // the CPU op's shape and dtype checks, word for word
  const Tensor &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
  const AttentionShape s = shape_of(a, q, k, op);
  AttentionRng rng{0, 0, 0};
  if (s.dropout > 0) {
    Generator& gen = dropout_generator_of(a.attrs);
    const Generator::State st = gen.state();
    rng = {st.seed, st.stream, st.offset};
    gen.set_state({st.seed, st.stream, st.offset + cpu::attention_dropout_words(s.b, s.hq, s.tq, s.tk)});
  }
  Tensor out = empty_on(q, q.shape(), q.dtype()), lse = empty_on(q, {s.b, s.hq, s.tq}, q.dtype());
  Tensor state = empty_on(q, {3}, DType::i64);
  attention_forward(q.dtype(), s, operand(q), operand(k), operand(v), out.raw_data(), lse.raw_data(),
                    ptr<int64_t>(state), rng);
  return Outputs{out, lse, state};
}

Outputs backward(const Args& a) {
  constexpr const char* op = "scaled_dot_product_attention_backward";
  infer(op, a);
  const Tensor &q = a.inputs[1], &k = a.inputs[2], &v = a.inputs[3], &state = a.inputs[6];
  if (state.shape() != Shape{3} || state.dtype() != DType::i64) {
    fail<ValueError>("{}: dropout state must be i64 [3], got {} {}", op, name(state.dtype()), to_string(state.shape()));
  }
  const AttentionShape s = shape_of(a, q, k, op);
  const Tensor dout = a.inputs[0].contiguous(), out = a.inputs[4].contiguous(), lse = a.inputs[5].contiguous();
  const Tensor rng = state.contiguous();
  Tensor delta = empty_on(q, {s.b, s.hq, s.tq}, q.dtype());
  Tensor dq = empty_on(q, q.shape(), q.dtype()), dk = empty_on(k, k.shape(), k.dtype()),
         dv = empty_on(v, v.shape(), v.dtype());
  attention_backward(q.dtype(), s, dout.raw_data(), operand(q), operand(k), operand(v), out.raw_data(),
                     lse.raw_data(), ptr<int64_t>(rng), delta.raw_data(), dq.raw_data(), dk.raw_data(), dv.raw_data());
  return Outputs{dq, dk, dv};
}

}  // namespace

void install_attention_kernels(const op::KernelAdder& add) {
  add("scaled_dot_product_attention", cuda_kernel({DType::f32, DType::f64}, forward));
  add("scaled_dot_product_attention_backward", cuda_kernel({DType::f32, DType::f64}, backward));
}

}  // namespace braid::cuda
