// PowerSGD (Vogels et al., NeurIPS 2019), as PyTorch's powerSGD_hook runs it.
//
// Each tensor M [n, m] of the bucket (matrix view, codec.h) with
// (n + m) r * min_rate < n m is approximated at rank r = min(n, m, rank) by one
// step of subspace iteration, warm-started from the previous step's Q:
//   Q <- orthogonalise(Q);  P = M Q;  P <- all-reduce sum, orthogonalise;
//   Q = M^T P;  Q <- all-reduce sum / W;  M^ = P Q^T
// Tensors below that bar (vectors, small matrices) are all-reduced as they
// are, in the same all-reduce as the P's. With error feedback the bucket
// starts as grad + memory and memory = that - the result, for the whole
// bucket as PyTorch keeps it (for the plain tensors this is the local
// gradient's deviation from the average, which sums to zero over ranks and so
// never changes an average). Q and P live in one flat buffer each, matrices
// grouped by shape in order of first appearance (PyTorch's layout, so a Q
// can be handed from one to the other). Gram-Schmidt orthogonalisation, as
// PyTorch's for rank <= 2 (it switches to Householder QR above, which agrees
// up to column signs). Per step and matrix: 2 n m r multiply-adds for P and Q
// and (n + m) r values on the wire instead of n m.
#include <chrono>
#include <cmath>
#include <map>

#include "braid/base/rng.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/wire.h"

namespace braid::comm::codec {
namespace {

using Clock = std::chrono::steady_clock;

struct Part {
  size_t at = 0;        // offset of the tensor in the bucket
  size_t rows = 0, cols = 0, rank = 0;
  size_t p = 0, q = 0;  // offsets in the P and Q buffers
};

struct Split {
  std::vector<Part> compressed;     // in P/Q buffer order
  std::vector<Part> plain;          // in bucket order
  size_t plain_values = 0, p_values = 0, q_values = 0;
};

Split split(std::span<const Matrix> layout, const CodecOptions& o) {
  Split s;
  std::vector<Part> compress;
  size_t at = 0;
  for (const Matrix& m : layout) {
    const size_t r = std::min({m.rows, m.cols, static_cast<size_t>(o.powersgd_rank)});
    const Part part{.at = at, .rows = m.rows, .cols = m.cols, .rank = r};
    if (static_cast<double>((m.rows + m.cols) * r) * o.powersgd_min_rate < static_cast<double>(m.size())) {
      compress.push_back(part);
    } else {
      s.plain.push_back(part);
      s.plain_values += m.size();
    }
    at += m.size();
  }
  // Group by shape, shapes in order of first appearance.
  std::vector<std::pair<size_t, size_t>> shapes;
  for (const Part& p : compress) {
    if (std::find(shapes.begin(), shapes.end(), std::pair{p.rows, p.cols}) == shapes.end()) shapes.emplace_back(p.rows, p.cols);
  }
  for (const auto& shape : shapes) {
    for (Part p : compress) {
      if (std::pair{p.rows, p.cols} != shape) continue;
      p.p = s.p_values;
      p.q = s.q_values;
      s.p_values += p.rows * p.rank;
      s.q_values += p.cols * p.rank;
      s.compressed.push_back(p);
    }
  }
  return s;
}

// Gram-Schmidt on the columns of a [rows, r] row-major matrix.
void orthogonalise(float* a, size_t rows, size_t r, float epsilon) {
  for (size_t i = 0; i < r; ++i) {
    double sq = 0;
    for (size_t k = 0; k < rows; ++k) sq += static_cast<double>(a[k * r + i]) * a[k * r + i];
    const float norm = static_cast<float>(std::sqrt(sq)) + epsilon;
    // A zero column stays zero (PyTorch would make it NaN without epsilon).
    const float inv = norm > 0 ? 1.0f / norm : 0.0f;
    for (size_t k = 0; k < rows; ++k) a[k * r + i] *= inv;
    for (size_t j = i + 1; j < r; ++j) {
      double dot = 0;
      for (size_t k = 0; k < rows; ++k) dot += static_cast<double>(a[k * r + i]) * a[k * r + j];
      const float d = static_cast<float>(dot);
      for (size_t k = 0; k < rows; ++k) a[k * r + j] -= d * a[k * r + i];
    }
  }
}

// The products below keep the long dimension (a row of m, c values) in the
// innermost loop, contiguous and free of stores into the accumulators, so
// it runs in vector lanes: Q is used transposed, qt [r, c].

// t [cols, rows] = a [rows, cols] transposed.
void transpose(const float* a, size_t rows, size_t cols, float* t) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
}

std::vector<float> transposed(const float* a, size_t rows, size_t cols) {
  std::vector<float> t(rows * cols);
  transpose(a, rows, cols, t.data());
  return t;
}

float dot(const float* a, const float* b, size_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += alpha x
void axpy(float alpha, const float* x, float* y, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// p [n, r] = m [n, c] q [c, r]
void m_times_q(const float* m, const float* q, float* p, size_t n, size_t c, size_t r) {
  const std::vector<float> qt = transposed(q, c, r);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < r; ++k) p[i * r + k] = dot(m + i * c, &qt[k * c], c);
}

// q [c, r] = m^T p, m [n, c], p [n, r]
void mt_times_p(const float* m, const float* p, float* q, size_t n, size_t c, size_t r) {
  std::vector<float> qt(r * c, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < r; ++k) axpy(p[i * r + k], m + i * c, &qt[k * c], c);
  transpose(qt.data(), r, c, q);
}

// m [n, c] = p q^T
void p_times_qt(const float* p, const float* q, float* m, size_t n, size_t c, size_t r) {
  const std::vector<float> qt = transposed(q, c, r);
  for (size_t i = 0; i < n; ++i) {
    float* row = m + i * c;
    std::fill(row, row + c, 0.0f);
    for (size_t k = 0; k < r; ++k) axpy(p[i * r + k], &qt[k * c], row, c);
  }
}

class PowerSgd final : public Codec {
 public:
  using Codec::Codec;

  void encode(std::span<const float> grad, std::span<const Matrix> layout, BucketState& state,
              std::vector<std::byte>& message) override {
    // One worker alone: the same iteration without the all-reduces.
    const Split s = split(layout, o_);
    std::vector<float> x = with_memory(grad, state);
    std::vector<float>& q = start_q(s, state);
    std::vector<float> p(s.p_values);
    for (const Part& c : s.compressed) m_times_q(&x[c.at], &q[c.q], &p[c.p], c.rows, c.cols, c.rank);
    for (const Part& c : s.compressed) orthogonalise(&p[c.p], c.rows, c.rank, eps());
    for (const Part& c : s.compressed) mt_times_p(&x[c.at], &p[c.p], &q[c.q], c.rows, c.cols, c.rank);
    message.clear();
    Writer w(message);
    w.put<uint64_t>(grad.size());
    for (const Part& c : s.plain) w.put_all<float>(std::span<const float>(&x[c.at], c.rows * c.cols));
    w.put_all<float>(p);
    w.put_all<float>(q);
    if (o_.error_feedback) {
      std::vector<float> sent(grad.size(), 0.0f);
      decode_add(message, layout, sent);
      std::vector<float>& m = state.tensor("memory", grad.size());
      for (size_t i = 0; i < m.size(); ++i) m[i] = x[i] - sent[i];
    }
  }

  void decode_add(std::span<const std::byte> message, std::span<const Matrix> layout, std::span<float> out) const override {
    const Split s = split(layout, o_);
    Reader r(message, "powersgd");
    if (r.get<uint64_t>() != out.size()) fail<ValueError>("powersgd message: not for {} values", out.size());
    for (const Part& c : s.plain) {
      const std::byte* b = r.take(c.rows * c.cols * sizeof(float));
      for (size_t i = 0; i < c.rows * c.cols; ++i) {
        float v;
        std::memcpy(&v, b + i * sizeof(float), sizeof v);
        out[c.at + i] += v;
      }
    }
    std::vector<float> p(s.p_values), q(s.q_values), m;
    std::memcpy(p.data(), r.take(p.size() * sizeof(float)), p.size() * sizeof(float));
    std::memcpy(q.data(), r.take(q.size() * sizeof(float)), q.size() * sizeof(float));
    r.expect_end();
    for (const Part& c : s.compressed) {
      m.resize(c.rows * c.cols);
      p_times_qt(&p[c.p], &q[c.q], m.data(), c.rows, c.cols, c.rank);
      for (size_t i = 0; i < m.size(); ++i) out[c.at + i] += m[i];
    }
  }

 protected:
  void combine(Communicator& comm, std::span<float> grad, std::span<const Matrix> layout, BucketState& state,
               const AverageOptions& o, CodecStats& stats) override {
    const auto t0 = Clock::now();
    const Split s = split(layout, o_);
    const std::vector<float> x = with_memory(grad, state);  // the bucket as it goes in (PyTorch's input_tensor_cp)
    std::vector<float>& q = start_q(s, state);
    // One all-reduce for the plain tensors and the P's: [plain | P].
    std::vector<float> first(s.plain_values + s.p_values);
    size_t at = 0;
    for (const Part& c : s.plain) {
      std::copy_n(&x[c.at], c.rows * c.cols, &first[at]);
      at += c.rows * c.cols;
    }
    float* p = first.data() + s.plain_values;
    for (const Part& c : s.compressed) m_times_q(&x[c.at], &q[c.q], p + c.p, c.rows, c.cols, c.rank);
    const auto t1 = Clock::now();
    wait(comm.allreduce(first, {.op = Op::sum, .timeout = o.timeout}), comm, "all-reduce of P", state, o);
    const auto t2 = Clock::now();
    const float w = static_cast<float>(comm.size());
    at = 0;
    for (const Part& c : s.plain) {
      for (size_t i = 0; i < c.rows * c.cols; ++i) grad[c.at + i] = first[at + i] / w;
      at += c.rows * c.cols;
    }
    for (const Part& c : s.compressed) orthogonalise(p + c.p, c.rows, c.rank, eps());
    for (const Part& c : s.compressed) mt_times_p(&x[c.at], p + c.p, &q[c.q], c.rows, c.cols, c.rank);
    const auto t3 = Clock::now();
    wait(comm.allreduce(q, {.op = Op::sum, .timeout = o.timeout}), comm, "all-reduce of Q", state, o);
    const auto t4 = Clock::now();
    for (float& v : q) v /= w;  // kept: next step's warm start
    for (const Part& c : s.compressed) p_times_qt(p + c.p, &q[c.q], &grad[c.at], c.rows, c.cols, c.rank);
    if (o_.error_feedback) {
      std::vector<float>& m = state.tensor("memory", grad.size());
      for (size_t i = 0; i < m.size(); ++i) m[i] = x[i] - grad[i];
    }
    const auto t5 = Clock::now();
    stats.raw_bytes += grad.size_bytes();
    stats.wire_bytes += (first.size() + q.size()) * sizeof(float);
    stats.encode_s += std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count();
    stats.decode_s += std::chrono::duration<double>(t5 - t4).count();
    stats.calls++;
  }

 private:
  float eps() const { return static_cast<float>(o_.powersgd_epsilon); }

  std::vector<float> with_memory(std::span<const float> grad, BucketState& state) const {
    std::vector<float> x(grad.begin(), grad.end());
    if (o_.error_feedback) {
      const std::vector<float>& m = state.tensor("memory", grad.size());
      for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
    }
    return x;
  }

  // The warm-started Q, or (first compressed step, or a layout that changed)
  // a standard normal one that every rank draws alike; orthogonalised.
  std::vector<float>& start_q(const Split& s, BucketState& state) const {
    auto it = state.tensors.find("q");
    if (it == state.tensors.end() || it->second.size() != s.q_values) {
      std::vector<float>& q = state.tensor("q", s.q_values);
      Generator gen(o_.seed, /*stream=*/static_cast<uint64_t>(state.steps));  // same on every rank
      for (float& v : q) v = static_cast<float>(gen.normal());
      it = state.tensors.find("q");
    }
    for (const Part& c : s.compressed) orthogonalise(&it->second[c.q], c.cols, c.rank, eps());
    return it->second;
  }
};

}  // namespace

std::unique_ptr<Codec> make_powersgd_codec(const CodecOptions& options) { return std::make_unique<PowerSgd>(options); }

}  // namespace braid::comm::codec
