#include "braid/ops/attention.h"

#include <cmath>
#include <cstring>

#include "braid/ops/define.h"
#include "braid/ops/dropout.h"
#include "braid/tensor/cpu/attention.h"

namespace braid {

namespace op {
namespace {

constexpr const char* kForward = "scaled_dot_product_attention";
constexpr const char* kBackward = "scaled_dot_product_attention_backward";

cpu::AttentionParams params_of(const Attrs& a, const char* op) {
  cpu::AttentionParams p{.causal = a.b("causal"), .scale = a.f("scale"), .dropout = a.f("dropout")};
  if (!(p.dropout >= 0 && p.dropout <= 1)) fail<ValueError>("{}: dropout must be in [0, 1], got {}", op, p.dropout);
  if (!std::isfinite(p.scale)) fail<ValueError>("{}: scale must be finite, got {}", op, p.scale);
  return p;
}

// The Philox state of a call's dropout mask as an i64 [3] tensor: seed,
// stream, first word (all zero without dropout). An output of the forward so
// that the backward regenerates the same mask.
Tensor rng_tensor(const cpu::AttentionParams& p) {
  Tensor t = Tensor::empty({3}, DType::i64);
  const uint64_t words[3] = {p.seed, p.stream, p.first_word};
  std::memcpy(t.data<int64_t>(), words, sizeof words);
  return t;
}

void read_rng(const Tensor& t, cpu::AttentionParams& p) {
  if (t.shape() != Shape{3} || t.dtype() != DType::i64) {
    fail<ValueError>("{}: dropout state must be i64 [3], got {} {}", kBackward, name(t.dtype()), to_string(t.shape()));
  }
  uint64_t words[3];
  std::memcpy(words, t.contiguous().data<int64_t>(), sizeof words);
  p.seed = words[0], p.stream = words[1], p.first_word = words[2];
}

// Query-key pairs one (batch, head) computes: under causal masking query i
// sees i + 1 + (Tk - Tq) keys.
double pairs(const Shape& q, const Shape& k, bool causal) {
  const double tq = static_cast<double>(q[1]), tk = static_cast<double>(k[1]);
  return causal ? tq * (tk - tq) + tq * (tq + 1) / 2 : tq * tk;
}

// flops per visible pair and head dim element: 2 products of 2 flops forward
// (S = Q K^T, O = P V), 5 backward (S again, dV, dP, dQ, dK); the softmax
// adds a handful per pair. Depth: a dot product over D, then the two sums
// over the keys (the max and the normaliser), one after the other.
Cost attention_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a, int q_input,
                    double products, double per_pair) {
  const Shape& q = in[q_input].shape;
  const Shape& k = in[q_input + 1].shape;
  const double heads = static_cast<double>(q[0] * q[2]);
  const double flops = heads * pairs(q, k, a.b("causal")) * (2 * products * static_cast<double>(q[3]) + per_pair);
  double bytes = 0;
  for (const TensorMeta& m : in) bytes += bytes_of(m);
  for (const TensorMeta& m : out) bytes += bytes_of(m);
  return Cost{flops, bytes, log2_depth(static_cast<double>(q[3])) + 2 * log2_depth(static_cast<double>(k[1])) + 3};
}

void check(std::span<const TensorMeta> in, int q_input, const Attrs& a, const char* op) {
  cpu::check_attention(in[q_input].shape, in[q_input + 1].shape, in[q_input + 2].shape, in[q_input].dtype,
                       in[q_input + 1].dtype, in[q_input + 2].dtype, a.b("causal"), op);
}

}  // namespace

void define_attention_ops(const Definer& define) {
  // Inputs q, k, v; attributes causal, scale, dropout, generator (an address
  // dropout_generator_attr() gave, 0 for the thread's dropout generator).
  // Outputs: the attention [B, Tq, Hq, D], each row's log-sum-exp [B, Hq, Tq]
  // and the dropout mask's Philox state (i64 [3]), which the backward reads.
  define({.name = kForward, .family = "attention", .inputs = 3, .outputs = 3, .effect = Effect::random,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            check(in, 0, a, kForward);
            const Shape& q = in[0].shape;
            return Metas{in[0], {{q[0], q[2], q[1]}, in[0].dtype}, {{3}, DType::i64}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
            cpu::AttentionParams p = params_of(a.attrs, kForward);
            cpu::check_attention(q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(), v.dtype(), p.causal, kForward);
            if (p.dropout > 0) {
              // The generator's next words, as dropout() takes them; it moves
              // past every word the call reserves.
              Generator& gen = dropout_generator_of(a.attrs);
              const Generator::State st = gen.state();
              p.seed = st.seed, p.stream = st.stream, p.first_word = st.offset;
              const uint64_t words = cpu::attention_dropout_words(q.size(0), q.size(2), q.size(1), k.size(1));
              gen.set_state({st.seed, st.stream, st.offset + words});
            }
            cpu::AttentionForward f = cpu::attention_forward(q, k, v, p);
            return Outputs{f.out, f.lse, rng_tensor(p)};
          })},
          .backward = [](const GradArgs& g) {
            return op::call(op::find(kBackward),
                            {g.grad, g.inputs[0], g.inputs[1], g.inputs[2], g.outputs[0], g.outputs[1], g.outputs[2]},
                            {{"causal", g.attrs.i("causal")}, {"scale", g.attrs.f("scale")},
                             {"dropout", g.attrs.f("dropout")}});
          },
          .save_inputs = 0b111,
          .save_outputs = 0b111,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return attention_cost(in, out, a, 0, 2, 5);
          }});
  // Inputs g (of the attention), q, k, v, the forward's three outputs;
  // attributes causal, scale, dropout. Outputs dq, dk, dv.
  define({.name = kBackward, .family = "attention", .inputs = 7, .outputs = 3, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            check(in, 1, a, kBackward);
            if (in[0] != in[1] || in[4] != in[1]) {
              fail<ValueError>("{}: gradient {} {} and output {} {} must match q {} {}", kBackward, name(in[0].dtype),
                               to_string(in[0].shape), name(in[4].dtype), to_string(in[4].shape), name(in[1].dtype),
                               to_string(in[1].shape));
            }
            return Metas{in[1], in[2], in[3]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            cpu::AttentionParams p = params_of(a.attrs, kBackward);
            read_rng(a.inputs[6], p);
            cpu::AttentionGrads r =
                cpu::attention_backward(a.inputs[0], a.inputs[1], a.inputs[2], a.inputs[3], a.inputs[4], a.inputs[5], p);
            return Outputs{r.dq, r.dk, r.dv};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return attention_cost(in, out, a, 1, 5, 8);
          }});
}

}  // namespace op

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  const char* op = "scaled_dot_product_attention";
  if (!(options.dropout >= 0 && options.dropout <= 1)) {
    fail<ValueError>("{}: dropout must be in [0, 1], got {} (q {})", op, options.dropout, to_string(q.shape()));
  }
  cpu::check_attention(q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(), v.dtype(), options.causal, op);
  const double scale = options.scale != 0 ? options.scale : 1 / std::sqrt(static_cast<double>(q.size(3)));
  return op::call1(BRAID_OP("scaled_dot_product_attention"), {q, k, v},
                   {{"causal", int64_t{options.causal}},
                    {"scale", scale},
                    {"dropout", options.dropout},
                    {"generator", options.dropout > 0 ? dropout_generator_attr(options.generator) : int64_t{0}}});
}

}  // namespace braid
