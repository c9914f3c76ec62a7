#include "braid/parallel/context_parallel/ulysses.h"

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/ops/attention.h"
#include "braid/ops/shape.h"

namespace braid::parallel::context_parallel {

namespace {

// in [C, ...] contiguous, block j to rank j -> out [C, ...], block i from rank i.
Tensor alltoall(const Tensor& in, const comm::Communicator& cp, const char* what) {
  Tensor out = Tensor::empty(in.shape(), in.dtype(), in.device());
  const Duration timeout = cp.options().timeout;
  try {
    comm::Communicator(cp)
        .alltoall(comm::buffer_of(in), comm::buffer_of(out), {.timeout = timeout})
        .wait(Deadline::after(timeout * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("ulysses {} (context rank {} of {}): {}", what, cp.rank(), cp.size(), e.what());
  }
  return out;
}

// The two directions without autograd.
Tensor seq_to_heads_raw(const Tensor& x, const comm::Communicator& cp) {
  const int64_t n = cp.size(), b = x.size(0), tl = x.size(1), h = x.size(2), d = x.size(3);
  if (h % n != 0) {
    fail<ValueError>("ulysses: {} heads do not divide over parallel.context = {} ranks (x {})", h, n,
                     to_string(x.shape()));
  }
  // [B, Tl, C, H/C, D] -> [C, B, Tl, H/C, D]: block j holds head group j.
  const Tensor in = contiguous(permute(reshape(x, {b, tl, n, h / n, d}), {2, 0, 1, 3, 4}));
  const Tensor out = alltoall(in, cp, "sequence to heads");  // block i: rank i's tokens
  return reshape(contiguous(permute(out, {1, 0, 2, 3, 4})), {b, n * tl, h / n, d});
}

Tensor heads_to_seq_raw(const Tensor& x, const comm::Communicator& cp) {
  const int64_t n = cp.size(), b = x.size(0), t = x.size(1), hl = x.size(2), d = x.size(3);
  if (t % n != 0) fail<ValueError>("ulysses: {} tokens do not divide over {} ranks", t, n);
  // [B, C, Tl, H/C, D] -> [C, B, Tl, H/C, D]: block i holds rank i's tokens.
  const Tensor in = contiguous(permute(reshape(x, {b, n, t / n, hl, d}), {1, 0, 2, 3, 4}));
  const Tensor out = alltoall(in, cp, "heads to sequence");  // block j: head group j
  return reshape(contiguous(permute(out, {1, 2, 0, 3, 4})), {b, t / n, n * hl, d});
}

}  // namespace

Tensor sequence_to_heads(const Tensor& x, const comm::Communicator& cp) {
  if (cp.size() == 1) return x;
  Tensor y = seq_to_heads_raw(x.detach(), cp);
  autograd::record("ulysses_sequence_to_heads", {x}, y,
                   [cp](const Tensor& g) { return std::vector<Tensor>{heads_to_seq_raw(g.detach(), cp)}; });
  return y;
}

Tensor heads_to_sequence(const Tensor& x, const comm::Communicator& cp) {
  if (cp.size() == 1) return x;
  Tensor y = heads_to_seq_raw(x.detach(), cp);
  autograd::record("ulysses_heads_to_sequence", {x}, y,
                   [cp](const Tensor& g) { return std::vector<Tensor>{seq_to_heads_raw(g.detach(), cp)}; });
  return y;
}

Tensor ulysses_attention(const Tensor& q, const Tensor& k, const Tensor& v, const comm::Communicator& cp, bool causal,
                         double scale) {
  if (q.ndim() != 4 || k.ndim() != 4 || q.size(2) % cp.size() != 0 || k.size(2) % cp.size() != 0) {
    fail<ValueError>("ulysses_attention: q {} and k {} need heads and key/value heads divisible by parallel.context = "
                     "{}", to_string(q.shape()), to_string(k.shape()), cp.size());
  }
  const Tensor out = scaled_dot_product_attention(sequence_to_heads(q, cp), sequence_to_heads(k, cp),
                                                  sequence_to_heads(v, cp), {.causal = causal, .scale = scale});
  return heads_to_sequence(out, cp);
}

}  // namespace braid::parallel::context_parallel
