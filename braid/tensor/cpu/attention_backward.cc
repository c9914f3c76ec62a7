// The attention backward kernel (attention.h): the forward's probabilities
// recomputed block by block from the saved log-sum-exp, one task per (batch,
// query head). A task walks the key blocks; for each it sweeps the query
// blocks that see it, accumulating dK and dV of the key block in registers'
// reach and dQ of the whole head in a packed buffer, so no two tasks write one
// element of dQ. dK and dV of a key-value head are summed over its group of
// query heads: directly when the group is one head, else through per-query-head
// partial sums added in head order afterwards (the same sums on any thread
// count).
#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/attention.h"
#include "braid/tensor/cpu/attention_internal.h"
#include "braid/tensor/cpu/attention_tile.h"

namespace braid::cpu {
namespace sdpa {
namespace {

constexpr int64_t kBackwardRows = 64, kBackwardKeys = 64;
static_assert(kBackwardRows == kDropoutTile && kBackwardKeys == kDropoutTile, "a block's dropout draws are one tile");

template <class T>
struct BackwardScratch {
  Tensor holder;
  T *qt, *dot;                   // the head's (scale Q)^T and dO^T: [D, Tqp]
  T *q, *dout, *dq;              // (scale Q), dO and dQ rows: [Tq, Dp]
  T *lse, *delta;                // [Tqp], zero past Tq
  T *k, *dk, *dv;                // one key block's rows: [keys, Dp]
  T *p, *pd, *ds;                // one tile, transposed: [keys, rows] x 3
  uint16_t bits[kDropoutTile * kDropoutTile];  // its dropout draws
  BackwardScratch(int64_t tq, int64_t d, int64_t dp, bool dropout) {
    constexpr int64_t tile = kBackwardKeys * kBackwardRows;
    const int64_t tqp = padded<T>(tq);
    const int64_t n = 2 * d * tqp + 3 * tq * dp + 2 * tqp + 3 * kBackwardKeys * dp + (dropout ? 3 : 2) * tile;
    holder = Tensor::empty({n}, dtype_of<T>());
    qt = holder.data<T>();
    dot = qt + d * tqp;
    q = dot + d * tqp;
    dout = q + tq * dp;
    dq = dout + tq * dp;
    lse = dq + tq * dp;
    delta = lse + tqp;
    k = delta + tqp;
    dk = k + kBackwardKeys * dp;
    dv = dk + kBackwardKeys * dp;
    p = dv + kBackwardKeys * dp;
    ds = p + tile;
    pd = dropout ? ds + tile : p;  // without dropout P is its own dropped version
  }
};

// Where a task writes dK and dV rows: the [B, Tk, Hkv, D] gradients, or the
// [B, Hq, Tk, D] partial sums of one query head.
template <class T>
struct KeyGradOut {
  T *dk, *dv;
  int64_t row_stride;
};

// Tiles are transposed as in the forward: p[c, r] for key j0 + c, query i0 + r.
template <class T>
void backward_head(const Dims& g, const AttentionParams& p, const Operand<T>& q, const Operand<T>& k,
                   const Operand<T>& v, const Operand<T>& out, const Operand<T>& dout, const T* lse, T* dq,
                   const KeyGradOut<T>& kg, int64_t b, int64_t h, BackwardScratch<T>& w) {
  constexpr int64_t R = kBackwardRows;
  const int64_t d = g.d, dp = padded<T>(d), tqp = padded<T>(g.tq), hk = h / g.group;
  const T scale = static_cast<T>(p.scale);
  pack_rows(q.at(b, 0, h), q.st, q.sd, g.tq, d, scale, w.q, dp);
  pack_rows(dout.at(b, 0, h), dout.st, dout.sd, g.tq, d, T{1}, w.dout, dp);
  pack_transposed(q.at(b, 0, h), q.st, q.sd, g.tq, tqp, d, scale, w.qt, tqp);
  pack_transposed(dout.at(b, 0, h), dout.st, dout.sd, g.tq, tqp, d, T{1}, w.dot, tqp);
  std::fill(w.dq, w.dq + g.tq * dp, T{0});
  const T* row_lse = lse + (b * g.hq + h) * g.tq;
  for (int64_t i = 0; i < tqp; ++i) {
    w.lse[i] = i < g.tq ? row_lse[i] : T{0};
    double s = 0;  // rowsum(dO * O)
    if (i < g.tq) {
      const T* o = out.at(b, i, h);
      const T* go = w.dout + i * dp;
      if (out.sd == 1) {
#pragma omp simd reduction(+ : s)
        for (int64_t e = 0; e < d; ++e) s += static_cast<double>(go[e]) * static_cast<double>(o[e]);
      } else {
        for (int64_t e = 0; e < d; ++e) s += static_cast<double>(go[e]) * static_cast<double>(o[e * out.sd]);
      }
    }
    w.delta[i] = static_cast<T>(s);
  }
  const bool drop = p.dropout > 0;
  const uint32_t threshold = dropout_threshold(p.dropout);
  const T keep_scale = p.dropout < 1 ? static_cast<T>(1 / (1 - p.dropout)) : T{0};
  const int64_t query_tiles = (g.tq + kDropoutTile - 1) / kDropoutTile;
  const int64_t key_tiles = (g.tk + kDropoutTile - 1) / kDropoutTile;
  for (int64_t j0 = 0; j0 < g.tk; j0 += kBackwardKeys) {
    const int64_t nj = std::min(kBackwardKeys, g.tk - j0);
    std::fill(w.dk, w.dk + nj * dp, T{0});
    std::fill(w.dv, w.dv + nj * dp, T{0});
    // The first query block with a row that sees key j0.
    const int64_t first = (p.causal ? std::max<int64_t>(0, j0 - g.shift) : 0) / R * R;
    const T* kj = k.at(b, j0, hk);
    const T* vj = v.at(b, j0, hk);
    if (first < g.tq) pack_rows(kj, k.st, k.sd, nj, d, T{1}, w.k, dp);
    for (int64_t i0 = first; i0 < g.tq; i0 += R) {
      const int64_t mi = std::min(R, g.tq - i0), mip = padded<T>(mi);
      // Key j0 + c is visible to queries i0 + r with r >= c + (j0 - shift - i0).
      const Band keys_n = p.causal ? Band{Band::n_from, j0 - g.shift - i0} : Band{};
      const Band keys_k = p.causal ? Band{Band::k_from, j0 - g.shift - i0} : Band{};
      const Band queries_k = p.causal ? Band{Band::k_to, i0 + g.shift - j0} : Band{};
      gemm(nj, mip, d, kj, k.st, k.sd, w.qt + i0, tqp, w.p, R, false, keys_n);  // S^T = K (scale Q)^T
      for (int64_t c = 0; c < nj; ++c) {
        T* pc = w.p + c * R;
        for (int64_t r = 0; r < mip; ++r) pc[r] -= w.lse[i0 + r];
        exp_inplace(pc, mip);
        const int64_t hidden = p.causal ? std::clamp<int64_t>(j0 + c - g.shift - i0, 0, mip) : 0;
        for (int64_t r = 0; r < hidden; ++r) pc[r] = T{0};
        for (int64_t r = mi; r < mip; ++r) pc[r] = T{0};
      }
      if (drop) {
        const int64_t tile = ((b * g.hq + h) * query_tiles + i0 / kDropoutTile) * key_tiles + j0 / kDropoutTile;
        dropout_tile_bits(p.seed, p.stream, p.first_word, static_cast<uint64_t>(tile), nj, mi, w.bits);
        for (int64_t c = 0; c < nj; ++c) {
          const T* pc = w.p + c * R;
          T* pdc = w.pd + c * R;
          const uint16_t* bits = w.bits + c * kDropoutTile;
          for (int64_t r = 0; r < mi; ++r) pdc[r] = bits[r] >= threshold ? pc[r] * keep_scale : T{0};
          for (int64_t r = mi; r < mip; ++r) pdc[r] = T{0};
        }
      }
      gemm(nj, dp, mi, w.pd, R, 1, w.dout + i0 * dp, dp, w.dv, dp, true, keys_k);  // dV += Pd^T dO
      gemm(nj, mip, d, vj, v.st, v.sd, w.dot + i0, tqp, w.ds, R, false, keys_n);  // dPd^T = V dO^T
      for (int64_t c = 0; c < nj; ++c) {
        // dS = P * (dPd * Z - delta) = Pd * dPd - P * delta, Z the dropout factor.
        // Masked entries of dPd^T may be left unwritten (keys_n): zero.
        const T* pc = w.p + c * R;
        const T* pdc = w.pd + c * R;
        T* dsc = w.ds + c * R;
        const int64_t hidden = p.causal ? std::clamp<int64_t>(j0 + c - g.shift - i0, 0, mip) : 0;
        for (int64_t r = 0; r < hidden; ++r) dsc[r] = T{0};
        for (int64_t r = hidden; r < mip; ++r) dsc[r] = pdc[r] * dsc[r] - pc[r] * w.delta[i0 + r];
      }
      gemm(nj, dp, mi, w.ds, R, 1, w.q + i0 * dp, dp, w.dk, dp, true, keys_k);  // dK += dS^T (scale Q)
      gemm(mi, dp, nj, w.ds, 1, R, w.k, dp, w.dq + i0 * dp, dp, true, queries_k);  // dQ += dS K
    }
    for (int64_t c = 0; c < nj; ++c) {
      T* dkr = kg.dk + (j0 + c) * kg.row_stride;
      T* dvr = kg.dv + (j0 + c) * kg.row_stride;
      std::copy(w.dk + c * dp, w.dk + c * dp + d, dkr);
      std::copy(w.dv + c * dp, w.dv + c * dp + d, dvr);
    }
  }
  for (int64_t i = 0; i < g.tq; ++i) {
    T* o = dq + ((b * g.tq + i) * g.hq + h) * d;
    for (int64_t e = 0; e < d; ++e) o[e] = w.dq[i * dp + e] * scale;
  }
}

template <class T>
void backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
              const Tensor& lse, const AttentionParams& p, const AttentionGrads& r) {
  const Dims g = dims_of(q, k);
  const Operand<T> oq(q), ok(k), ov(v), oout(out), odout(dout);
  const T* l = lse.data<T>();
  T* dq = r.dq.data<T>();
  T* dk = r.dk.data<T>();
  T* dv = r.dv.data<T>();
  // Grouped heads: partial sums per query head [B, Hq, Tk, D], then summed.
  Tensor partial;
  if (g.group > 1) partial = Tensor::empty({2, g.b, g.hq, g.tk, g.d}, q.dtype());
  const int64_t half = g.b * g.hq * g.tk * g.d;
  run_tasks(g.b * g.hq, [&](const TaskSource& next) {
    BackwardScratch<T> w(g.tq, g.d, padded<T>(g.d), p.dropout > 0);
    for (int64_t t = next(); t >= 0; t = next()) {
      const int64_t b = t / g.hq, h = t % g.hq;
      KeyGradOut<T> kg;
      if (g.group == 1) {
        kg = {dk + (b * g.tk * g.hkv + h) * g.d, dv + (b * g.tk * g.hkv + h) * g.d, g.hkv * g.d};
      } else {
        T* base = partial.data<T>() + ((b * g.hq + h) * g.tk) * g.d;
        kg = {base, base + half, g.d};
      }
      backward_head(g, p, oq, ok, ov, oout, odout, l, dq, kg, b, h, w);
    }
  });
  if (g.group == 1) return;
  const T* part = partial.data<T>();
  parallel_for(0, g.b * g.tk, std::max<int64_t>(1, 4096 / (g.hkv * g.d)), [&](int64_t lo, int64_t hi) {
    for (int64_t bj = lo; bj < hi; ++bj) {
      const int64_t b = bj / g.tk, j = bj % g.tk;
      for (int64_t hk = 0; hk < g.hkv; ++hk) {
        for (int64_t which = 0; which < 2; ++which) {
          T* o = (which == 0 ? dk : dv) + ((b * g.tk + j) * g.hkv + hk) * g.d;
          for (int64_t e = 0; e < g.d; ++e) o[e] = T{0};
          for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h) {
            const T* s = part + which * half + ((b * g.hq + h) * g.tk + j) * g.d;
            for (int64_t e = 0; e < g.d; ++e) o[e] += s[e];
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace sdpa

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& p) {
  const char* op = "scaled_dot_product_attention_backward";
  check_attention(q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(), v.dtype(), p.causal, op);
  const sdpa::Dims g = sdpa::dims_of(q, k);
  if (dout.shape() != q.shape() || out.shape() != q.shape() || dout.dtype() != q.dtype() ||
      out.dtype() != q.dtype()) {
    fail<ValueError>("{}: gradient {} {} and output {} {} must match q {} {}", op, name(dout.dtype()),
                     to_string(dout.shape()), name(out.dtype()), to_string(out.shape()), name(q.dtype()),
                     to_string(q.shape()));
  }
  if (lse.shape() != Shape{g.b, g.hq, g.tq} || lse.dtype() != q.dtype()) {
    fail<ValueError>("{}: log-sum-exp {} {} is not [batch, query heads, query time] {} of q {}", op, name(lse.dtype()),
                     to_string(lse.shape()), name(q.dtype()), to_string(q.shape()));
  }
  const Tensor lc = lse.contiguous();
  AttentionGrads r{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(k.shape(), q.dtype()),
                   Tensor::empty(v.shape(), q.dtype())};
  if (g.tq == 0 || g.b == 0) {
    r.dk.fill(0);
    r.dv.fill(0);
    return r;
  }
  if (q.dtype() == DType::f32) {
    sdpa::backward<float>(dout, q, k, v, out, lc, p, r);
  } else {
    sdpa::backward<double>(dout, q, k, v, out, lc, p, r);
  }
  return r;
}

}  // namespace braid::cpu
