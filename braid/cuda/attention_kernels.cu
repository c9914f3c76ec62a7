#include "braid/cuda/attention_kernels.h"

#include <limits>

#include "braid/cuda/dropout_kernels.h"

namespace braid::cuda {

namespace {

// Dropout tiles of the CPU kernel (braid/tensor/cpu/attention_tile.h): the
// (query, key) plane of each (b, h) in 64 x 64 tiles of 2048 words.
constexpr int64_t kTile = 64;
constexpr uint64_t kTileWords = kTile * kTile / 2;

// The geometry and dropout constants every kernel of one call shares.
template <class T>
struct Geometry {
  int64_t b, tq, tk, hq, hkv, d, group, shift;  // shift: query i sees keys j <= i + shift
  bool causal;
  T scale;
  bool drop;
  uint32_t threshold;  // keep where the 16 draw bits are >= this (ceil(p * 2^16))
  T keep_scale;        // 1 / (1 - p); 0 for p = 1

  Geometry(const AttentionShape& s)  // NOLINT(google-explicit-constructor)
      : b(s.b), tq(s.tq), tk(s.tk), hq(s.hq), hkv(s.hkv), d(s.d), group(s.hq / s.hkv), shift(s.tk - s.tq),
        causal(s.causal), scale(static_cast<T>(s.scale)), drop(s.dropout > 0),
        threshold(static_cast<uint32_t>(std::ceil(s.dropout * 65536.0))),
        keep_scale(s.dropout < 1 ? static_cast<T>(1 / (1 - s.dropout)) : T{0}) {}

  // Keys query i sees: [0, key_end(i)).
  BRAID_HD int64_t key_end(int64_t i) const {
    if (!causal) return tk;
    const int64_t e = i + shift + 1;
    return e < tk ? e : tk;
  }
  // The first query that sees key j.
  BRAID_HD int64_t query_begin(int64_t j) const {
    if (!causal) return 0;
    const int64_t f = j - shift;
    return f > 0 ? f : 0;
  }

  // The dropout factor of (b, h, i, j): keep_scale or 0, from the CPU
  // kernel's word for it (AttentionParams in braid/tensor/cpu/attention.h).
  BRAID_HD T keep(const uint64_t* rng, int64_t bi, int64_t h, int64_t i, int64_t j) const {
    const int64_t key_tiles = (tk + kTile - 1) / kTile, query_tiles = (tq + kTile - 1) / kTile;
    const auto tile = static_cast<uint64_t>(((bi * hq + h) * query_tiles + i / kTile) * key_tiles + j / kTile);
    const auto e = static_cast<uint64_t>((j % kTile) * kTile + i % kTile);
    const uint64_t word = rng[2] + tile * kTileWords + e / 2;
    const uint32_t w = philox(rng[0], rng[1], word / 4).w[word % 4];
    const uint32_t bits = e % 2 ? w >> 16 : w & 0xffffu;
    return bits >= threshold ? keep_scale : T{0};
  }
};

template <class T>
struct Operand {
  const T* p;
  int64_t sb, st, sh, sd;

  explicit Operand(const AttentionOperand& o)
      : p(static_cast<const T*>(o.data)), sb(o.sb), st(o.st), sh(o.sh), sd(o.sd) {}
  BRAID_HD const T* row(int64_t b, int64_t t, int64_t h) const { return p + b * sb + t * st + h * sh; }
};

template <class T>
BRAID_HD inline T dot(const T* a, int64_t sa, const T* b, int64_t sb, int64_t n) {
  T s{0};
  for (int64_t e = 0; e < n; ++e) s += a[e * sa] * b[e * sb];
  return s;
}

// A thread per query row r = (b * Hq + h) * Tq + i (lse's layout).
template <class T>
struct Forward {
  Geometry<T> g;
  Operand<T> q, k, v;
  T* out;
  T* lse;
  int64_t* rng_out;
  uint64_t rng[3];

  BRAID_HD void operator()(int64_t r) const {
    if (r == 0) {
      for (int w = 0; w < 3; ++w) rng_out[w] = static_cast<int64_t>(rng[w]);
    }
    const int64_t i = r % g.tq, h = (r / g.tq) % g.hq, bi = r / (g.tq * g.hq), hk = h / g.group;
    const T* qi = q.row(bi, i, h);
    T acc[kMaxHeadDim];
    for (int64_t e = 0; e < g.d; ++e) acc[e] = T{0};
    T m = -std::numeric_limits<T>::infinity();
    double l = 0;  // the normaliser in double, as the CPU kernel sums it
    const int64_t kend = g.key_end(i);
    for (int64_t j = 0; j < kend; ++j) {
      const T s = g.scale * dot(qi, q.sd, k.row(bi, j, hk), k.sd, g.d);
      if (s > m) {  // rescale what was summed under the old max
        const T alpha = std::exp(m - s);
        l *= static_cast<double>(alpha);
        for (int64_t e = 0; e < g.d; ++e) acc[e] *= alpha;
        m = s;
      }
      T pj = std::exp(s - m);
      l += static_cast<double>(pj);  // the normaliser sees every weight, dropped or not
      if (g.drop) pj *= g.keep(rng, bi, h, i, j);
      const T* vj = v.row(bi, j, hk);
      for (int64_t e = 0; e < g.d; ++e) acc[e] += pj * vj[e * v.sd];
    }
    const T inv = static_cast<T>(1 / l);
    T* o = out + ((bi * g.tq + i) * g.hq + h) * g.d;
    for (int64_t e = 0; e < g.d; ++e) o[e] = acc[e] * inv;
    lse[r] = static_cast<T>(static_cast<double>(m) + std::log(l));
  }
};

// A thread per query row: delta_i = dO_i . O_i, then
// dQ_i = scale sum_j P_ij (dP_ij - delta_i) K_j with P = exp(S - lse) and
// dP_ij = (dO_i . V_j) times the row's dropout factor.
template <class T>
struct BackwardQuery {
  Geometry<T> g;
  Operand<T> q, k, v;
  const T* dout;
  const T* out;
  const T* lse;
  const uint64_t* rng;
  T* delta;
  T* dq;

  BRAID_HD void operator()(int64_t r) const {
    const int64_t i = r % g.tq, h = (r / g.tq) % g.hq, bi = r / (g.tq * g.hq), hk = h / g.group;
    const int64_t row = ((bi * g.tq + i) * g.hq + h) * g.d;  // in dout, out and dq
    const T di = dot(dout + row, 1, out + row, 1, g.d);
    delta[r] = di;
    const T* qi = q.row(bi, i, h);
    T acc[kMaxHeadDim];
    for (int64_t e = 0; e < g.d; ++e) acc[e] = T{0};
    const int64_t kend = g.key_end(i);
    for (int64_t j = 0; j < kend; ++j) {
      const T* kj = k.row(bi, j, hk);
      const T p = std::exp(g.scale * dot(qi, q.sd, kj, k.sd, g.d) - lse[r]);
      T dp = dot(dout + row, 1, v.row(bi, j, hk), v.sd, g.d);
      if (g.drop) dp *= g.keep(rng, bi, h, i, j);
      const T ds = p * (dp - di);
      for (int64_t e = 0; e < g.d; ++e) acc[e] += ds * kj[e * k.sd];
    }
    for (int64_t e = 0; e < g.d; ++e) dq[row + e] = acc[e] * g.scale;
  }
};

// A thread per key row c = (b * Hkv + hk) * Tk + j: over the query heads of
// group hk and the queries that see key j,
//   dV_j += P_ij M_ij dO_i,  dK_j += scale P_ij (M_ij dO_i . V_j - delta_i) Q_i.
template <class T>
struct BackwardKey {
  Geometry<T> g;
  Operand<T> q, k, v;
  const T* dout;
  const T* lse;
  const uint64_t* rng;
  const T* delta;
  T* dk;
  T* dv;

  BRAID_HD void operator()(int64_t c) const {
    const int64_t j = c % g.tk, hk = (c / g.tk) % g.hkv, bi = c / (g.tk * g.hkv);
    const T* kj = k.row(bi, j, hk);
    const T* vj = v.row(bi, j, hk);
    T gk[kMaxHeadDim], gv[kMaxHeadDim];
    for (int64_t e = 0; e < g.d; ++e) gk[e] = gv[e] = T{0};
    for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h) {
      for (int64_t i = g.query_begin(j); i < g.tq; ++i) {
        const int64_t r = (bi * g.hq + h) * g.tq + i;
        const T* qi = q.row(bi, i, h);
        const T* doi = dout + ((bi * g.tq + i) * g.hq + h) * g.d;
        const T p = std::exp(g.scale * dot(qi, q.sd, kj, k.sd, g.d) - lse[r]);
        const T keep = g.drop ? g.keep(rng, bi, h, i, j) : T{1};
        const T pk = p * keep;
        for (int64_t e = 0; e < g.d; ++e) gv[e] += pk * doi[e];
        const T ds = p * (keep * dot(doi, 1, vj, v.sd, g.d) - delta[r]);
        for (int64_t e = 0; e < g.d; ++e) gk[e] += ds * qi[e * q.sd];
      }
    }
    const int64_t row = ((bi * g.tk + j) * g.hkv + hk) * g.d;
    for (int64_t e = 0; e < g.d; ++e) {
      dk[row + e] = gk[e] * g.scale;
      dv[row + e] = gv[e];
    }
  }
};

template <class F>
void with_float(DType dtype, F&& f) {
  if (dtype == DType::f32) {
    f(float{});
  } else if (dtype == DType::f64) {
    f(double{});
  } else {
    throw std::invalid_argument("attention kernels take f32 and f64");
  }
}

}  // namespace

void attention_forward(DType dtype, const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                       const AttentionOperand& v, void* out, void* lse, int64_t* rng_out, const AttentionRng& rng) {
  with_float(dtype, [&](auto z) {
    using T = decltype(z);
    Forward<T> f{Geometry<T>(s), Operand<T>(q), Operand<T>(k), Operand<T>(v), static_cast<T*>(out),
                 static_cast<T*>(lse), rng_out, {rng.seed, rng.stream, rng.first_word}};
    for_each(s.b * s.hq * s.tq, f, "attention_forward");
  });
}

void attention_backward(DType dtype, const AttentionShape& s, const void* dout, const AttentionOperand& q,
                        const AttentionOperand& k, const AttentionOperand& v, const void* out, const void* lse,
                        const int64_t* rng, void* delta, void* dq, void* dk, void* dv) {
  with_float(dtype, [&](auto z) {
    using T = decltype(z);
    const Geometry<T> g(s);
    const auto* words = reinterpret_cast<const uint64_t*>(rng);
    for_each(s.b * s.hq * s.tq,
             BackwardQuery<T>{g, Operand<T>(q), Operand<T>(k), Operand<T>(v), static_cast<const T*>(dout),
                              static_cast<const T*>(out), static_cast<const T*>(lse), words, static_cast<T*>(delta),
                              static_cast<T*>(dq)},
             "attention_backward_query");
    for_each(s.b * s.hkv * s.tk,
             BackwardKey<T>{g, Operand<T>(q), Operand<T>(k), Operand<T>(v), static_cast<const T*>(dout),
                            static_cast<const T*>(lse), words, static_cast<const T*>(delta), static_cast<T*>(dk),
                            static_cast<T*>(dv)},
             "attention_backward_key");
  });
}

}  // namespace braid::cuda
