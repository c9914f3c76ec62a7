// The attention forward kernel, the shape checks and the dropout mask
// (attention.h). The backward is in attention_backward.cc.
#include "braid/tensor/cpu/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/attention_internal.h"
#include "braid/tensor/cpu/attention_tile.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid::cpu {

uint64_t attention_dropout_words(int64_t batch, int64_t heads, int64_t tq, int64_t tk) {
  const auto tiles = [](int64_t n) { return static_cast<uint64_t>((n + sdpa::kDropoutTile - 1) / sdpa::kDropoutTile); };
  return static_cast<uint64_t>(batch) * static_cast<uint64_t>(heads) * tiles(tq) * tiles(tk) *
         static_cast<uint64_t>(sdpa::kDropoutTile * sdpa::kDropoutTile / 2);
}

void check_attention(const Shape& q, const Shape& k, const Shape& v, DType q_dtype, DType k_dtype, DType v_dtype,
                     bool causal, const char* op) {
  const std::string shapes = fmt::format("q {} {}, k {} {}, v {} {}", name(q_dtype), to_string(q), name(k_dtype),
                                         to_string(k), name(v_dtype), to_string(v));
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) {
    fail<ValueError>("{}: q, k and v must be [batch, time, heads, head dim], got {}", op, shapes);
  }
  if (q_dtype != k_dtype || q_dtype != v_dtype) fail<ValueError>("{}: dtypes differ: {}", op, shapes);
  if (q_dtype != DType::f32 && q_dtype != DType::f64) {
    fail<ValueError>("{}: dtype {} is not supported (f32 and f64 are): {}", op, name(q_dtype), shapes);
  }
  if (k != v) fail<ValueError>("{}: k and v must have one shape: {}", op, shapes);
  if (q[0] != k[0]) fail<ValueError>("{}: batch sizes differ: {}", op, shapes);
  if (q[3] != k[3]) fail<ValueError>("{}: head dims differ: {}", op, shapes);
  if (k[2] == 0 || q[2] % k[2] != 0) {
    fail<ValueError>("{}: {} query heads are not a multiple of {} key-value heads: {}", op, q[2], k[2], shapes);
  }
  if (q[3] == 0) fail<ValueError>("{}: head dim is 0: {}", op, shapes);
  if (k[1] == 0 && q[1] > 0) fail<ValueError>("{}: no keys to attend to: {}", op, shapes);
  if (causal && q[1] > k[1]) {
    fail<ValueError>("{}: causal attention with more queries ({}) than keys ({}): the first rows would see no key: {}",
                     op, q[1], k[1], shapes);
  }
}

namespace sdpa {

Dims dims_of(const Tensor& q, const Tensor& k) {
  Dims g;
  g.b = q.size(0), g.tq = q.size(1), g.hq = q.size(2), g.d = q.size(3);
  g.tk = k.size(1), g.hkv = k.size(2);
  g.group = g.hq / g.hkv;
  g.shift = g.tk - g.tq;
  return g;
}

void run_tasks(int64_t tasks, const std::function<void(const TaskSource& next)>& worker) {
  if (tasks <= 0) return;
  std::atomic<int64_t> counter{0};
  const TaskSource next = [&counter, tasks]() {
    const int64_t t = counter.fetch_add(1, std::memory_order_relaxed);
    return t < tasks ? t : int64_t{-1};
  };
  parallel_for(0, std::min<int64_t>(tasks, num_threads()), 1,
               [&](int64_t, int64_t) { worker(next); });
}

}  // namespace sdpa

namespace sdpa {
namespace {

// Rows of a query block and keys of a key block.
constexpr int64_t kForwardRows = 64, kForwardKeys = 64;
static_assert(kForwardRows == kDropoutTile && kForwardKeys == kDropoutTile, "a block's dropout draws are one tile");

template <class T>
struct ForwardScratch {
  Tensor holder;
  T *qt, *o, *v, *s;  // [D, rows], [rows, Dp], [keys, Dp], [keys, rows]
  T* q;               // a lone query row [Dp]
  uint16_t bits[kDropoutTile * kDropoutTile];  // one tile's dropout draws
  ForwardScratch(int64_t d, int64_t dp) {
    const int64_t n = d * kForwardRows + kForwardRows * dp + kForwardKeys * dp + kForwardKeys * kForwardRows + dp;
    holder = Tensor::empty({n}, dtype_of<T>());
    qt = holder.data<T>();
    o = qt + d * kForwardRows;
    v = o + kForwardRows * dp;
    s = v + kForwardKeys * dp;
    q = s + kForwardKeys * kForwardRows;
  }
};

// One block of query rows [i0, i0 + mi) of head h in batch b. The scores are
// held transposed, s[c, r] for key j0 + c and query i0 + r, so the softmax
// statistics of the block's queries are vectors along r.
template <class T>
void forward_block(const Dims& g, const AttentionParams& p, const Operand<T>& q, const Operand<T>& k,
                   const Operand<T>& v, T* out, T* lse, int64_t b, int64_t h, int64_t i0, ForwardScratch<T>& w) {
  constexpr int64_t R = kForwardRows;
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const int64_t d = g.d, dp = padded<T>(d), mi = std::min(R, g.tq - i0), mip = padded<T>(mi), hk = h / g.group;
  pack_transposed(q.at(b, i0, h), q.st, q.sd, mi, mip, d, static_cast<T>(p.scale), w.qt, R);
  std::fill(w.o, w.o + mi * dp, T{0});
  // Per query: the running max, the running sum (in double) and scratch.
  T m[R], mx[R], shift[R], alpha[R], sum[R];
  double l[R];
  std::fill(m, m + mip, -kInf);
  std::fill(l, l + mip, 0.0);
  const bool drop = p.dropout > 0;
  const uint32_t threshold = dropout_threshold(p.dropout);
  const T keep_scale = p.dropout < 1 ? static_cast<T>(1 / (1 - p.dropout)) : T{0};
  const int64_t key_tiles = (g.tk + kDropoutTile - 1) / kDropoutTile;
  const int64_t first_tile = ((b * g.hq + h) * ((g.tq + kDropoutTile - 1) / kDropoutTile) + i0 / kDropoutTile) * key_tiles;
  // Keys the last row of the block sees.
  const int64_t kend = p.causal ? std::min(g.tk, i0 + mi + g.shift) : g.tk;
  for (int64_t j0 = 0; j0 < kend; j0 += kForwardKeys) {
    const int64_t nj = std::min(kForwardKeys, kend - j0);
    // Key j0 + c is visible to queries i0 + r with r >= c + (j0 - shift - i0).
    const Band keys_rows = p.causal ? Band{Band::n_from, j0 - g.shift - i0} : Band{};
    const Band query_rows = p.causal ? Band{Band::k_to, i0 + g.shift - j0} : Band{};
    gemm(nj, mip, d, k.at(b, j0, hk), k.st, k.sd, w.qt, R, w.s, R, false, keys_rows);  // S^T = K (scale Q)^T
    std::fill(mx, mx + mip, -kInf);
    for (int64_t c = 0; c < nj; ++c) {
      T* s = w.s + c * R;
      // Key j0 + c is past the causal limit of queries i < j0 + c - shift.
      const int64_t hidden = p.causal ? std::clamp<int64_t>(j0 + c - g.shift - i0, 0, mip) : 0;
      for (int64_t r = 0; r < hidden; ++r) s[r] = -kInf;
      max_into(mx, s, mip);
    }
    for (int64_t r = 0; r < mip; ++r) {
      const T mnew = std::max(m[r], mx[r]);
      shift[r] = mnew == -kInf ? T{0} : mnew;  // no key seen yet: exp(-inf - 0) = 0
      alpha[r] = m[r] - shift[r];
      m[r] = mnew;
      sum[r] = T{0};
    }
    exp_inplace(alpha, mip);  // exp(m_old - m_new): 0 for the first block
    for (int64_t c = 0; c < nj; ++c) {
      T* s = w.s + c * R;
      for (int64_t r = 0; r < mip; ++r) s[r] -= shift[r];
      exp_inplace(s, mip);
      for (int64_t r = 0; r < mip; ++r) sum[r] += s[r];
    }
    for (int64_t r = 0; r < mi; ++r) {
      l[r] = l[r] * static_cast<double>(alpha[r]) + static_cast<double>(sum[r]);
      if (alpha[r] != T{1}) {
        T* o = w.o + r * dp;
        for (int64_t e = 0; e < dp; ++e) o[e] *= alpha[r];
      }
    }
    if (drop) {  // after the sums: the normaliser sees every weight
      dropout_tile_bits(p.seed, p.stream, p.first_word, static_cast<uint64_t>(first_tile + j0 / kDropoutTile), nj, mi,
                        w.bits);
      for (int64_t c = 0; c < nj; ++c) {
        T* s = w.s + c * R;
        const uint16_t* bits = w.bits + c * kDropoutTile;
        for (int64_t r = 0; r < mi; ++r) s[r] = bits[r] >= threshold ? s[r] * keep_scale : T{0};
      }
    }
    // V's rows in place when they are whole vectors of contiguous elements.
    const T* vj = v.at(b, j0, hk);
    const bool in_place = v.sd == 1 && d == dp;
    if (!in_place) pack_rows(vj, v.st, v.sd, nj, d, T{1}, w.v, dp);
    gemm(mi, dp, nj, w.s, 1, R, in_place ? vj : w.v, in_place ? v.st : dp, w.o, dp, true,
         query_rows);  // O += P V, P = (S^T)^T
  }
  for (int64_t r = 0; r < mi; ++r) {
    const T inv = static_cast<T>(1 / l[r]);
    T* o = out + ((b * g.tq + i0 + r) * g.hq + h) * d;
    for (int64_t e = 0; e < d; ++e) o[e] = w.o[r * dp + e] * inv;
    lse[(b * g.hq + h) * g.tq + i0 + r] = static_cast<T>(static_cast<double>(m[r]) + std::log(l[r]));
  }
}

// A block of one query row (a decoding step, or the last row of Tq): the
// scores of a key block are one contiguous vector and the softmax runs along
// the keys. (In forward_block's layout the row would fill a whole vector of
// queries to use one lane: measured 2x slower than PyTorch at Tk = 1024.)
template <class T>
void forward_row(const Dims& g, const AttentionParams& p, const Operand<T>& q, const Operand<T>& k,
                 const Operand<T>& v, T* out, T* lse, int64_t b, int64_t h, int64_t i0, ForwardScratch<T>& w) {
  const int64_t d = g.d, dp = padded<T>(d), hk = h / g.group;
  pack_rows(q.at(b, i0, h), q.st, q.sd, 1, d, static_cast<T>(p.scale), w.q, dp);
  std::fill(w.o, w.o + dp, T{0});
  T m = -std::numeric_limits<T>::infinity();
  double l = 0;
  const uint32_t threshold = dropout_threshold(p.dropout);
  const T keep_scale = p.dropout < 1 ? static_cast<T>(1 / (1 - p.dropout)) : T{0};
  const int64_t key_tiles = (g.tk + kDropoutTile - 1) / kDropoutTile;
  const int64_t first_tile = ((b * g.hq + h) * ((g.tq + kDropoutTile - 1) / kDropoutTile) + i0 / kDropoutTile) * key_tiles;
  const int64_t kend = p.causal ? std::min(g.tk, i0 + 1 + g.shift) : g.tk;  // the keys the row sees
  for (int64_t j0 = 0; j0 < kend; j0 += kForwardKeys) {
    const int64_t nj = std::min(kForwardKeys, kend - j0);
    const T* kj = k.at(b, j0, hk);
    T* s = w.s;
    if (k.sd == 1 && d == dp) {
      dots(nj, d, kj, k.st, w.q, s, 1);
    } else {
      for (int64_t c = 0; c < nj; ++c) s[c] = dot(kj + c * k.st, k.sd, w.q, 1, d);
    }
    T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < nj; ++c) mx = s[c] > mx ? s[c] : mx;
    const T mnew = std::max(m, mx);
    const T alpha = std::exp(m - mnew);  // 0 for the first block
    for (int64_t c = 0; c < nj; ++c) s[c] -= mnew;
    exp_inplace(s, nj);
    T sum{0};
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < nj; ++c) sum += s[c];
    l = l * static_cast<double>(alpha) + static_cast<double>(sum);
    m = mnew;
    if (alpha != T{1}) {
      for (int64_t e = 0; e < dp; ++e) w.o[e] *= alpha;
    }
    if (p.dropout > 0) {  // after the sum: the normaliser sees every weight
      dropout_tile_bits(p.seed, p.stream, p.first_word, static_cast<uint64_t>(first_tile + j0 / kDropoutTile), nj,
                        i0 % kDropoutTile + 1, w.bits);
      for (int64_t c = 0; c < nj; ++c) {
        s[c] = w.bits[c * kDropoutTile + i0 % kDropoutTile] >= threshold ? s[c] * keep_scale : T{0};
      }
    }
    const T* vj = v.at(b, j0, hk);
    const bool in_place = v.sd == 1 && d == dp;
    if (!in_place) pack_rows(vj, v.st, v.sd, nj, d, T{1}, w.v, dp);
    gemm(1, dp, nj, s, 0, 1, in_place ? vj : w.v, in_place ? v.st : dp, w.o, dp, true);  // O += P V
  }
  const T inv = static_cast<T>(1 / l);
  T* o = out + ((b * g.tq + i0) * g.hq + h) * d;
  for (int64_t e = 0; e < d; ++e) o[e] = w.o[e] * inv;
  lse[(b * g.hq + h) * g.tq + i0] = static_cast<T>(static_cast<double>(m) + std::log(l));
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p, const Tensor& out,
             const Tensor& lse) {
  const Dims g = dims_of(q, k);
  const Operand<T> oq(q), ok(k), ov(v);
  T* o = out.data<T>();
  T* l = lse.data<T>();
  const int64_t blocks = (g.tq + kForwardRows - 1) / kForwardRows, heads = g.b * g.hq;
  // Under causal masking later query blocks see more keys: hand them out
  // first, so the last tasks to start are the short ones.
  run_tasks(blocks * heads, [&](const TaskSource& next) {
    ForwardScratch<T> w(g.d, padded<T>(g.d));
    for (int64_t t = next(); t >= 0; t = next()) {
      const int64_t ib = blocks - 1 - t / heads, bh = t % heads;
      const int64_t i0 = ib * kForwardRows;
      if (g.tq - i0 == 1) {
        forward_row(g, p, oq, ok, ov, o, l, bh / g.hq, bh % g.hq, i0, w);
      } else {
        forward_block(g, p, oq, ok, ov, o, l, bh / g.hq, bh % g.hq, i0, w);
      }
    }
  });
}

}  // namespace
}  // namespace sdpa

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p) {
  check_attention(q.shape(), k.shape(), v.shape(), q.dtype(), k.dtype(), v.dtype(), p.causal,
                  "scaled_dot_product_attention");
  const sdpa::Dims g = sdpa::dims_of(q, k);
  AttentionForward r{Tensor::empty(q.shape(), q.dtype()), Tensor::empty({g.b, g.hq, g.tq}, q.dtype())};
  if (q.dtype() == DType::f32) {
    sdpa::forward<float>(q, k, v, p, r.out, r.lse);
  } else {
    sdpa::forward<double>(q, k, v, p, r.out, r.lse);
  }
  return r;
}

Tensor attention_dropout_mask(int64_t batch, int64_t heads, int64_t tq, int64_t tk, DType dtype,
                              const AttentionParams& p) {
  using sdpa::kDropoutTile;
  Tensor mask = Tensor::empty({batch, heads, tq, tk}, dtype);
  const uint32_t threshold = sdpa::dropout_threshold(p.dropout);
  const int64_t query_tiles = (tq + kDropoutTile - 1) / kDropoutTile, key_tiles = (tk + kDropoutTile - 1) / kDropoutTile;
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T keep_scale = p.dropout < 1 ? static_cast<T>(1 / (1 - p.dropout)) : T{0};
      T* m = mask.data<T>();
      std::vector<uint16_t> bits(kDropoutTile * kDropoutTile);
      for (int64_t bh = 0; bh < batch * heads; ++bh) {
        for (int64_t it = 0; it < query_tiles; ++it) {
          for (int64_t jt = 0; jt < key_tiles; ++jt) {
            const int64_t i0 = it * kDropoutTile, j0 = jt * kDropoutTile;
            const int64_t mi = std::min(kDropoutTile, tq - i0), nj = std::min(kDropoutTile, tk - j0);
            const auto tile = static_cast<uint64_t>((bh * query_tiles + it) * key_tiles + jt);
            sdpa::dropout_tile_bits(p.seed, p.stream, p.first_word, tile, nj, mi, bits.data());
            for (int64_t r = 0; r < mi; ++r) {
              for (int64_t c = 0; c < nj; ++c) {
                m[(bh * tq + i0 + r) * tk + j0 + c] = bits[c * kDropoutTile + r] >= threshold ? keep_scale : T{0};
              }
            }
          }
        }
      }
    } else {
      fail<ValueError>("attention_dropout_mask: dtype {} is not supported (f32 and f64 are)", name(dtype));
    }
  });
  return mask;
}

}  // namespace braid::cpu
