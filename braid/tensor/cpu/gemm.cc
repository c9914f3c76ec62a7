#include "braid/tensor/cpu/gemm.h"

#include <cblas.h>
#include <dnnl.h>

#include <dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/tensor/cpu/cast.h"
#include "braid/tensor/cpu/onednn.h"

namespace braid::cpu {
namespace {

struct Key {
  bool ta, tb;
  int64_t m, n, k;
  int threads;
  auto tie() const { return std::tie(ta, tb, m, n, k, threads); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// Candidates: {openblas, onednn} x {the pool's threads, one thread}. A small
// product on a busy machine often runs faster on one thread than paying a
// fork and a barrier in which the other thread may be descheduled; measured:
// the 784-256-256-10 MLP at batch 64 on 2 shared cores ran 20x slower with
// every GEMM split over both threads.
constexpr int kSlots = 4;
constexpr GemmBackend kSlotBackend[kSlots] = {GemmBackend::openblas, GemmBackend::onednn,
                                              GemmBackend::openblas, GemmBackend::onednn};
constexpr bool kSlotSingle[kSlots] = {false, false, true, true};

using Tuner = OnlineTuner<Key, kSlots>;

Tuner& tuner() {
  static Tuner t;
  return t;
}

std::atomic<GemmBackend> g_default{GemmBackend::automatic};

void check_args(const char* op, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                int64_t ldb, int64_t ldc) {
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max<int64_t>(1, a_cols) ||
      ldb < std::max<int64_t>(1, b_cols) || ldc < std::max<int64_t>(1, n)) {
    fail<ValueError>("{}: bad arguments m={} n={} k={} lda={} ldb={} ldc={} (trans_a={}, trans_b={})",
                     op, m, n, k, lda, ldb, ldc, ta, tb);
  }
}

template <class T>
void scale_rows(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + n, T(0));
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

void run_sgemm(GemmBackend b, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* bm, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  if (b == GemmBackend::onednn) {
    const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, bm,
                                       ldb, beta, c, ldc);
    if (s != dnnl_success) {
      fail<ValueError>("gemm: dnnl_sgemm failed with status {} for m={} n={} k={}",
                       static_cast<int>(s), m, n, k);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), bm, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// ---- bf16: oneDNN matmul primitives, cached per shape, layout, scaling and threads.

struct MatmulKey {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  int threads;
  auto tie() const { return std::tie(ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, threads); }
  bool operator<(const MatmulKey& o) const { return tie() < o.tie(); }
};

struct Matmul {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c, scratchpad;
};

std::shared_ptr<Matmul> build_matmul(const MatmulKey& k) {
  using dnnl::memory;
  using dt = memory::data_type;
  // Row-major [rows, cols] with row stride ld, or its transpose stored
  // [cols, rows]: the same matrix seen through strides {1, ld}.
  auto mat = [](int64_t rows, int64_t cols, bool trans, int64_t ld, dt type) {
    return memory::desc({rows, cols}, type, trans ? memory::dims{1, ld} : memory::dims{ld, 1});
  };
  auto c = std::make_shared<Matmul>();
  c->a = mat(k.m, k.k, k.ta, k.lda, dt::bf16);
  c->b = mat(k.k, k.n, k.tb, k.ldb, dt::bf16);
  c->c = mat(k.m, k.n, false, k.ldc, dt::f32);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(k.beta);  // C = alpha A B + beta C
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(c->a, c->b, c->c), attr, onednn::engine());
  c->prim = dnnl::matmul(pd);
  c->scratchpad = pd.scratchpad_desc();
  return c;
}

std::shared_ptr<Matmul> lookup_matmul(const MatmulKey& k) {
  static std::mutex mu;
  static std::map<MatmulKey, std::shared_ptr<Matmul>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, build_matmul(k)).first;
  return it->second;
}

void run_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
              const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  using dnnl::memory;
  try {
    const auto mm = lookup_matmul({ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, num_threads()});
    auto& eng = onednn::engine();
    std::vector<Tensor> keep;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(mm->a, eng, const_cast<bf16*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(mm->b, eng, const_cast<bf16*>(b))},
                                         {DNNL_ARG_DST, memory(mm->c, eng, c)}};
    if (mm->scratchpad.get_size() > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(mm->scratchpad, eng, onednn::scratch(mm->scratchpad.get_size(), keep)));
    }
    mm->prim.execute(onednn::stream(), args);
    onednn::stream().wait();
  } catch (const dnnl::error& e) {
    fail<ValueError>("gemm(bf16): oneDNN matmul failed for m={} n={} k={} (trans_a={}, trans_b={}): {}", m, n, k,
                     ta, tb, e.what());
  }
}

Tuner& tuner_bf16() {
  static Tuner t;
  return t;
}

}  // namespace

std::string_view name(GemmBackend b) {
  switch (b) {
    case GemmBackend::automatic: return "automatic";
    case GemmBackend::openblas: return "openblas";
    case GemmBackend::onednn: return "onednn";
  }
  return "?";
}

void set_default_gemm_backend(GemmBackend b) { g_default.store(b); }
GemmBackend default_gemm_backend() { return g_default.load(); }

GemmBackend gemm_choice(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  const int slot = tuner().choice(Key{trans_a, trans_b, m, n, k, num_threads()});
  return slot < 0 ? GemmBackend::automatic : kSlotBackend[slot];
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          GemmBackend backend) {
  check_args("gemm(f32)", ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.f) {  // C = beta * C; BLAS would still read A and B
    scale_rows(m, n, beta, c, ldc);
    return;
  }
  if (backend == GemmBackend::automatic) backend = g_default.load();
  if (backend != GemmBackend::automatic) {
    run_sgemm(backend, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Online autotune over {openblas, onednn} x {pool threads, one thread}.
  const int threads = num_threads();
  tuner().run(Key{ta, tb, m, n, k, threads}, threads > 1 ? kSlots : 2, [&](int slot) {
    ThreadsScope single(kSlotSingle[slot] ? 1 : 0);
    run_sgemm(kSlotBackend[slot], ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          GemmBackend /*backend: f64 has OpenBLAS only*/) {
  check_args("gemm(f64)", ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0) {
    scale_rows(m, n, beta, c, ldc);
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
          const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  check_args("gemm(bf16)", ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.f) {
    scale_rows(m, n, beta, c, ldc);
    return;
  }
  if (!onednn::has_bf16()) {
    // No bf16 kernels for this CPU: the f32 GEMM on the operands widened to
    // f32 (exact) computes the same products, without the speed.
    // Stored extents: the last row ends at its last column, not at ld.
    const int64_t a_size = (ta ? k - 1 : m - 1) * lda + (ta ? m : k);
    const int64_t b_size = (tb ? n - 1 : k - 1) * ldb + (tb ? k : n);
    Tensor af = Tensor::empty({a_size}, DType::f32), bf = Tensor::empty({b_size}, DType::f32);
    cast_bf16_to_f32(a, af.data<float>(), a_size);
    cast_bf16_to_f32(b, bf.data<float>(), b_size);
    return gemm(ta, tb, m, n, k, alpha, af.data<float>(), lda, bf.data<float>(), ldb, beta, c, ldc);
  }
  const int threads = num_threads();
  if (threads == 1) return run_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  // Slot 0: the pool's threads; slot 1: one thread.
  tuner_bf16().run(Key{ta, tb, m, n, k, threads}, 2, [&](int slot) {
    ThreadsScope single(slot == 1 ? 1 : 0);
    run_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

}  // namespace braid::cpu
