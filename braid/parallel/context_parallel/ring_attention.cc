#include "braid/parallel/context_parallel/ring_attention.h"

#include <cmath>
#include <memory>

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/ops/shape.h"
#include "braid/parallel/context_parallel/layout.h"
#include "braid/tensor/cpu/attention.h"

namespace braid::parallel::context_parallel {

namespace {

// Point-to-point tags on the context group: blocks of k and v, and the
// gradients that follow them. Messages of one (peer, tag) match in posting
// order, and every rank runs the layers in the same order.
constexpr uint64_t kBlockTag = 1, kGradTag = 2;

// A block as it travels: [chunks per rank, 2 (k, v), B, c, KV, D], so each
// (chunk, k or v) is one contiguous [B, c, KV, D].
Tensor part(const Tensor& block, int64_t chunk, int64_t which) {
  const Shape shape(block.shape().begin() + 2, block.shape().end());
  const int64_t n = numel(shape);
  return block.as_strided(shape, contiguous_strides(shape), block.offset() + (chunk * 2 + which) * n);
}

template <class T>
void add_into_typed(const Tensor& dst, const Tensor& src) {
  T* d = dst.data<T>();
  const T* s = src.data<T>();
  for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += s[i];
}

// dst += src, both contiguous of one shape and dtype.
void add_into(const Tensor& dst, const Tensor& src) {
  BRAID_CHECK_EQ(dst.numel(), src.numel());
  if (dst.dtype() == DType::f64) {
    add_into_typed<double>(dst, src);
  } else {
    add_into_typed<float>(dst, src);
  }
}

// The online-softmax merge of one more block's result into a query chunk's:
// out [B, c, H, D] and lse [B, H, c], contiguous.
template <class T>
void merge_typed(const Tensor& acc_out, const Tensor& acc_lse, const Tensor& out, const Tensor& lse) {
  const int64_t b = acc_out.size(0), c = acc_out.size(1), h = acc_out.size(2), d = acc_out.size(3);
  T* ao = acc_out.data<T>();
  T* al = acc_lse.data<T>();
  const T* o = out.data<T>();
  const T* l = lse.data<T>();
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t t = 0; t < c; ++t) {
        const int64_t li = (bi * h + hi) * c + t;
        const double l1 = al[li], l2 = l[li];
        if (l2 == -INFINITY) continue;  // the block showed this row nothing
        const double m = std::max(l1, l2);
        const double total = m + std::log(std::exp(l1 - m) + std::exp(l2 - m));
        const T w1 = static_cast<T>(std::exp(l1 - total)), w2 = static_cast<T>(std::exp(l2 - total));
        T* row = ao + ((bi * c + t) * h + hi) * d;
        const T* add = o + ((bi * c + t) * h + hi) * d;
        for (int64_t k = 0; k < d; ++k) row[k] = w1 * row[k] + w2 * add[k];
        al[li] = static_cast<T>(total);
      }
    }
  }
}

void merge(const Tensor& acc_out, const Tensor& acc_lse, const Tensor& out, const Tensor& lse) {
  if (acc_out.dtype() == DType::f64) {
    merge_typed<double>(acc_out, acc_lse, out, lse);
  } else {
    merge_typed<float>(acc_out, acc_lse, out, lse);
  }
}

enum class Visible : uint8_t { none, causal, whole };

// Query chunk gq against key chunk gk (global chunk indices).
Visible visible(int gq, int gk, bool causal) {
  if (!causal || gk < gq) return Visible::whole;
  return gk == gq ? Visible::causal : Visible::none;
}

// The ring and its transfers, with errors that say where the ring stood.
struct Ring {
  comm::Communicator cp;
  ContextLayout layout;
  int next, prev;
  Duration timeout;

  explicit Ring(const comm::Communicator& group, bool zigzag)
      : cp(group), layout{.size = group.size(), .rank = group.rank(), .zigzag = zigzag},
        next((group.rank() + 1) % group.size()), prev((group.rank() + group.size() - 1) % group.size()),
        timeout(group.options().timeout) {}

  comm::Work send(const Tensor& t, uint64_t tag) { return cp.send(comm::buffer_of(t), next, {.tag = tag}); }
  comm::Work recv(const Tensor& t, uint64_t tag) { return cp.recv(comm::buffer_of(t), prev, {.tag = tag}); }
  void wait(const comm::Work& w, const char* what, int step) const {
    try {
      w.wait(Deadline::after(timeout * 2));
    } catch (const TimeoutError& e) {
      fail<TimeoutError>("ring attention {} at step {} (context rank {} of {}): {}", what, step, cp.rank(), cp.size(),
                         e.what());
    }
  }
};

// What the backward needs, per query chunk: q, the merged out and lse (out
// as the one output tensor once the chunks are joined: the next layer keeps
// it anyway, so the chunks are not kept twice).
struct Saved {
  std::vector<Tensor> q, out, lse;
  Tensor joined_out;
  Tensor block;  // this rank's k and v as a travelling block
  cpu::AttentionParams params;
};

// The forward's C steps; fills saved.out and saved.lse.
void forward_ring(Ring& ring, Saved& s, bool causal) {
  const ContextLayout& L = ring.layout;
  const int n = L.size, r = L.rank, per = L.chunks_per_rank();
  Tensor cur = s.block;
  for (int t = 0; t < n; ++t) {
    const int owner = (r - t + n) % n;
    Tensor incoming;
    comm::Work sent, received;
    if (t + 1 < n) {  // the next block's hop, in flight while this one is attended to
      incoming = Tensor::empty(cur.shape(), cur.dtype());
      received = ring.recv(incoming, kBlockTag);
      sent = ring.send(cur, kBlockTag);
    }
    for (int i = 0; i < per; ++i) {
      for (int j = 0; j < per; ++j) {
        const Visible vis = visible(L.chunk_of(r, i), L.chunk_of(owner, j), causal);
        if (vis == Visible::none) continue;
        cpu::AttentionParams p = s.params;
        p.causal = vis == Visible::causal;
        cpu::AttentionForward f = cpu::attention_forward(s.q[i], part(cur, j, 0), part(cur, j, 1), p);
        if (!s.out[i].defined()) {
          s.out[i] = f.out, s.lse[i] = f.lse;
        } else {
          merge(s.out[i], s.lse[i], f.out, f.lse);
        }
      }
    }
    if (t + 1 < n) {
      ring.wait(received, "receive of k, v", t);
      ring.wait(sent, "send of k, v", t);
      cur = incoming;
    }
  }
}

struct Grads {
  std::vector<Tensor> dq;
  Tensor dblock;  // dk, dv laid out as the block
};

Grads backward_ring(Ring& ring, const Saved& s, const std::vector<Tensor>& dout, const std::vector<Tensor>& out,
                    bool causal) {
  const ContextLayout& L = ring.layout;
  const int n = L.size, r = L.rank, per = L.chunks_per_rank();
  Grads g;
  for (int i = 0; i < per; ++i) g.dq.push_back(Tensor::zeros(s.q[i].shape(), s.q[i].dtype()));
  Tensor cur = s.block;
  std::vector<std::pair<comm::Work, Tensor>> grad_sends;  // each send keeps its buffer alive
  for (int t = 0; t < n; ++t) {
    const int owner = (r - t + n) % n;
    Tensor incoming, acc_in;
    comm::Work sent, received, grad_received;
    if (t + 1 < n) {
      incoming = Tensor::empty(cur.shape(), cur.dtype());
      received = ring.recv(incoming, kBlockTag);
      sent = ring.send(cur, kBlockTag);
    }
    if (t > 0) {  // this block's gradient so far, from its previous visitor
      acc_in = Tensor::empty(cur.shape(), cur.dtype());
      grad_received = ring.recv(acc_in, kGradTag);
    }
    Tensor partial = Tensor::zeros(cur.shape(), cur.dtype());
    for (int i = 0; i < per; ++i) {
      for (int j = 0; j < per; ++j) {
        const Visible vis = visible(L.chunk_of(r, i), L.chunk_of(owner, j), causal);
        if (vis == Visible::none) continue;
        cpu::AttentionParams p = s.params;
        p.causal = vis == Visible::causal;
        cpu::AttentionGrads d =
            cpu::attention_backward(dout[i], s.q[i], part(cur, j, 0), part(cur, j, 1), out[i], s.lse[i], p);
        add_into(g.dq[i], d.dq);
        add_into(part(partial, j, 0), d.dk);
        add_into(part(partial, j, 1), d.dv);
      }
    }
    if (t > 0) {
      ring.wait(grad_received, "receive of dk, dv", t);
      add_into(partial, acc_in);
    }
    if (n == 1) {
      g.dblock = partial;
    } else {
      // To the block's next visitor; after the last step, to its owner.
      grad_sends.emplace_back(ring.send(partial, kGradTag), partial);
    }
    if (t + 1 < n) {
      ring.wait(received, "receive of k, v", t);
      ring.wait(sent, "send of k, v", t);
      cur = incoming;
    }
  }
  if (n > 1) {
    g.dblock = Tensor::empty(s.block.shape(), s.block.dtype());
    ring.wait(ring.recv(g.dblock, kGradTag), "receive of this rank's dk, dv", n);
    for (auto& [w, buffer] : grad_sends) ring.wait(w, "send of dk, dv", n);
  }
  return g;
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const ContextLayout& layout, bool causal) {
  cpu::check_attention(q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(), v.dtype(), causal, "ring_attention");
  if (!q.device().is_cpu()) fail<ValueError>("ring_attention: CPU tensors only, q is on {}", name(q.device()));
  if (q.size(1) != k.size(1) || q.size(1) % layout.chunks_per_rank() != 0) {
    fail<ValueError>("ring_attention: q {} and k {} must hold the same {} equal chunks of tokens",
                     to_string(q.shape()), to_string(k.shape()), layout.chunks_per_rank());
  }
}

}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const comm::Communicator& cp,
                      const RingOptions& o) {
  auto ring = std::make_shared<Ring>(cp, o.zigzag);
  const ContextLayout& L = ring->layout;
  check_inputs(q, k, v, L, o.causal);
  const int per = L.chunks_per_rank();
  const int64_t b = q.size(0), c = q.size(1) / per, kv_heads = k.size(2), d = q.size(3);
  auto s = std::make_shared<Saved>();
  s->params = {.causal = o.causal, .scale = o.scale != 0 ? o.scale : 1 / std::sqrt(static_cast<double>(d))};
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  s->block = Tensor::empty({per, 2, b, c, kv_heads, d}, q.dtype());
  for (int i = 0; i < per; ++i) {
    s->q.push_back(contiguous(slice(qd, 1, i * c, (i + 1) * c)));
    part(s->block, i, 0).copy_from(slice(kd, 1, i * c, (i + 1) * c));
    part(s->block, i, 1).copy_from(slice(vd, 1, i * c, (i + 1) * c));
  }
  s->out.resize(static_cast<size_t>(per));
  s->lse.resize(static_cast<size_t>(per));
  forward_ring(*ring, *s, o.causal);
  Tensor out = per == 1 ? s->out[0] : concat(s->out, 1);
  // Saved without the autograd record `out` is about to carry (the node
  // would hold itself through them).
  if (per == 1) {
    s->out[0] = s->out[0].detach();
  } else {
    s->joined_out = out.detach();
    s->out.clear();
  }
  autograd::record("ring_attention", {q, k, v}, out, [ring, s, causal = o.causal, per, c](const Tensor& g) {
    std::vector<Tensor> dout;
    const Tensor gd = g.detach();
    std::vector<Tensor> out = s->out;
    for (int i = 0; i < per; ++i) {
      dout.push_back(contiguous(slice(gd, 1, i * c, (i + 1) * c)));
      if (per > 1) out.push_back(contiguous(slice(s->joined_out, 1, i * c, (i + 1) * c)));
    }
    Grads gr = backward_ring(*ring, *s, dout, out, causal);
    std::vector<Tensor> dk, dv;
    for (int i = 0; i < per; ++i) {
      dk.push_back(part(gr.dblock, i, 0));
      dv.push_back(part(gr.dblock, i, 1));
    }
    auto join = [&](const std::vector<Tensor>& xs) { return xs.size() == 1 ? contiguous(xs[0]) : concat(xs, 1); };
    return std::vector<Tensor>{join(gr.dq), join(dk), join(dv)};
  });
  return out;
}

}  // namespace braid::parallel::context_parallel
