#include "braid/tensor/cpu/conv.h"

#include <fmt/format.h>

#include <atomic>
#include <tuple>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/tensor/cpu/cast.h"
#include "braid/tensor/cpu/onednn.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu {
namespace {

// Candidates: the implementations x {the pool's threads, one thread} (one
// thread can win on shared cores, where a descheduled worker stalls every
// barrier; the second half is tried only when the pool has several threads).
// Winograd only where it applies.
struct Candidate {
  ConvBackend backend;
  bool single;
};
constexpr int kCount = 8;
constexpr ConvBackend kF32Backends[4] = {ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked,
                                         ConvBackend::winograd};

// The f32 candidates for `g` at `threads`, in a fixed order (a tuner's slot
// indexes this list); returns how many.
int f32_candidates(const Conv2dGeometry& g, int threads, Candidate* out) {
  const int backends = winograd::applies(g) ? 4 : 3;
  int n = 0;
  for (bool single : {false, true}) {
    if (single && threads <= 1) break;
    for (int b = 0; b < backends; ++b) out[n++] = {kF32Backends[b], single};
  }
  return n;
}

// bf16 products: oneDNN's bf16 kernels, and the f32 implementations run on
// the operands widened to f32. A bf16 x bf16 product is exact in f32, so an
// f32 kernel over widened operands computes the same bf16 products with f32
// accumulation (up to summation order), and it can be the faster one: with a
// single input channel AMX does not apply (measured on the development
// machine, conv 1->32 at batch 64, one thread: bf16 backward-weights 1.1 ms
// plus 0.4 ms of layout reorders, f32 blocked 0.36 ms plus 0.5 ms).
struct Bf16Candidate {
  ConvBackend backend;
  bool widen;  // run the f32 implementation on widened operands
  bool single;
};
constexpr int kCountBf16 = 10;  // the pool's threads first, then one thread
constexpr Bf16Candidate kCandidatesBf16[kCountBf16] = {
    {ConvBackend::onednn_plain, false, false}, {ConvBackend::onednn_blocked, false, false},
    {ConvBackend::im2col, true, false},        {ConvBackend::onednn_plain, true, false},
    {ConvBackend::onednn_blocked, true, false}, {ConvBackend::onednn_plain, false, true},
    {ConvBackend::onednn_blocked, false, true}, {ConvBackend::im2col, true, true},
    {ConvBackend::onednn_plain, true, true},    {ConvBackend::onednn_blocked, true, true}};
// Where oneDNN has no bf16 kernels for the CPU (onednn::has_bf16): the
// widened ones only.
constexpr int kCountWidened = 6;
constexpr Bf16Candidate kCandidatesWidened[kCountWidened] = {
    {ConvBackend::im2col, true, false},         {ConvBackend::onednn_plain, true, false},
    {ConvBackend::onednn_blocked, true, false}, {ConvBackend::im2col, true, true},
    {ConvBackend::onednn_plain, true, true},    {ConvBackend::onednn_blocked, true, true}};

const Bf16Candidate* bf16_candidates() { return onednn::has_bf16() ? kCandidatesBf16 : kCandidatesWidened; }
int bf16_candidate_count() { return onednn::has_bf16() ? kCountBf16 : kCountWidened; }

struct Key {
  ConvPass pass;
  bool bias, bf16;
  int threads;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  auto tie() const {
    return std::tie(pass, bias, bf16, threads, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups);
  }
  bool operator<(const Key& k) const { return tie() < k.tie(); }
};

Key make_key(const Conv2dGeometry& g, ConvPass pass, bool bias, bool bf16) {
  return {pass, bias, bf16, num_threads(), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.stride_h, g.stride_w,
          g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
}

using Tuner = OnlineTuner<Key, kCount>;
using TunerBf16 = OnlineTuner<Key, kCountBf16>;

Tuner& tuner() {
  static Tuner t;
  return t;
}

TunerBf16& tuner_bf16() {
  static TunerBf16 t;
  return t;
}

std::atomic<ConvBackend> g_default{ConvBackend::automatic};

// Runs run(backend) with the pinned, settled or next-to-measure implementation.
template <class T, class Run>
void dispatch(const Conv2dGeometry& g, ConvPass pass, bool bias, ConvBackend backend, Run&& run) {
  if constexpr (!std::is_same_v<T, float>) {
    run(ConvBackend::im2col);  // oneDNN convolutions are f32 here
    return;
  }
  if (backend == ConvBackend::automatic) backend = g_default.load();
  if (backend != ConvBackend::automatic) {
    run(backend);
    return;
  }
  const Key key = make_key(g, pass, bias, /*bf16=*/false);
  Candidate candidates[kCount];
  const int count = f32_candidates(g, key.threads, candidates);
  tuner().run(key, count, [&](int slot) {
    ThreadsScope single(candidates[slot].single ? 1 : 0);
    run(candidates[slot].backend);
  });
}

// The same for bf16 products; run(candidate). Named backends: im2col runs
// on widened operands (it has no bf16 kernel), the oneDNN flavours run
// oneDNN's bf16 kernels (widened f32 ones where it has none for the CPU);
// automatic also tries oneDNN's f32 kernels widened.
template <class Run>
void dispatch_bf16(const Conv2dGeometry& g, ConvPass pass, bool bias, ConvBackend backend, Run&& run) {
  if (backend == ConvBackend::automatic) backend = g_default.load();
  if (backend != ConvBackend::automatic) {
    run(Bf16Candidate{backend, backend == ConvBackend::im2col || !onednn::has_bf16(), false});
    return;
  }
  const Key key = make_key(g, pass, bias, /*bf16=*/true);
  const Bf16Candidate* table = bf16_candidates();
  const int count = bf16_candidate_count();
  tuner_bf16().run(key, key.threads > 1 ? count : count / 2, [&](int slot) {
    ThreadsScope single(table[slot].single ? 1 : 0);
    run(table[slot]);
  });
}

// An f32 copy of n bf16 values (exact), from the caching allocator.
class Widened {
 public:
  Widened(const bf16* p, int64_t n) : t_(Tensor::empty({n}, DType::f32)) {
    cast_bf16_to_f32(p, t_.data<float>(), n);
  }
  const float* get() const { return t_.data<float>(); }

 private:
  Tensor t_;
};

int64_t x_size(const Conv2dGeometry& g) { return g.n * g.c * g.h * g.w; }
int64_t w_size(const Conv2dGeometry& g) { return g.o * (g.c / g.groups) * g.kh * g.kw; }
int64_t y_size(const Conv2dGeometry& g) { return g.n * g.o * g.oh() * g.ow(); }

}  // namespace

std::string_view name(ConvBackend b) {
  switch (b) {
    case ConvBackend::automatic: return "automatic";
    case ConvBackend::im2col: return "im2col";
    case ConvBackend::onednn_plain: return "onednn_plain";
    case ConvBackend::onednn_blocked: return "onednn_blocked";
    case ConvBackend::winograd: return "winograd";
  }
  return "?";
}

std::string Conv2dGeometry::to_string() const {
  return fmt::format("x [{}, {}, {}, {}], w [{}, {}, {}, {}], stride ({}, {}), padding ({}, {}), "
                     "dilation ({}, {}), groups {}",
                     n, c, h, w, o, groups > 0 ? c / groups : c, kh, kw, stride_h, stride_w, pad_h,
                     pad_w, dil_h, dil_w, groups);
}

void set_default_conv_backend(ConvBackend b) { g_default.store(b); }

ConvBackend conv_choice(const Conv2dGeometry& g, ConvPass pass, DType dtype) {
  const bool bf16 = dtype == DType::bf16;
  for (bool bias : {true, false}) {
    const Key key = make_key(g, pass, bias, bf16);
    const int slot = bf16 ? tuner_bf16().choice(key) : tuner().choice(key);
    if (slot < 0) continue;
    if (bf16) return bf16_candidates()[slot].backend;
    Candidate candidates[kCount];
    f32_candidates(g, key.threads, candidates);
    return candidates[slot].backend;
  }
  return ConvBackend::automatic;
}

template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    ConvBackend backend) {
  dispatch<T>(g, ConvPass::forward, b != nullptr, backend, [&](ConvBackend r) {
    if constexpr (std::is_same_v<T, float>) {
      if (r == ConvBackend::winograd && winograd::applies(g)) return winograd::forward(g, x, w, b, y);
      if (r == ConvBackend::onednn_plain || r == ConvBackend::onednn_blocked) {
        return onednn::forward(g, r == ConvBackend::onednn_blocked, x, w, b, y);
      }
    }
    im2col::forward(g, x, w, b, y);
  });
}

template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx,
                          ConvBackend backend) {
  dispatch<T>(g, ConvPass::backward_data, false, backend, [&](ConvBackend r) {
    if constexpr (std::is_same_v<T, float>) {
      if (r == ConvBackend::winograd && winograd::applies(g)) return winograd::backward_data(g, dy, w, dx);
      if (r == ConvBackend::onednn_plain || r == ConvBackend::onednn_blocked) {
        return onednn::backward_data(g, r == ConvBackend::onednn_blocked, dy, w, dx);
      }
    }
    im2col::backward_data(g, dy, w, dx);
  });
}

template <class T>
void conv2d_backward_weights(const Conv2dGeometry& g, const T* dy, const T* x, T* dw, T* db,
                             ConvBackend backend) {
  dispatch<T>(g, ConvPass::backward_weights, db != nullptr, backend, [&](ConvBackend r) {
    if constexpr (std::is_same_v<T, float>) {
      if (r == ConvBackend::winograd && winograd::applies(g)) return winograd::backward_weights(g, dy, x, dw, db);
      if (r == ConvBackend::onednn_plain || r == ConvBackend::onednn_blocked) {
        return onednn::backward_weights(g, r == ConvBackend::onednn_blocked, dy, x, dw, db);
      }
    }
    im2col::backward_weights(g, dy, x, dw, db);
  });
}

void conv2d_forward(const Conv2dGeometry& g, const bf16* x, const bf16* w, const float* b, float* y,
                    ConvBackend backend) {
  dispatch_bf16(g, ConvPass::forward, b != nullptr, backend, [&](Bf16Candidate c) {
    if (!c.widen) return onednn::forward(g, c.backend == ConvBackend::onednn_blocked, x, w, b, y);
    const Widened xf(x, x_size(g)), wf(w, w_size(g));
    conv2d_forward<float>(g, xf.get(), wf.get(), b, y, c.backend);
  });
}

void conv2d_backward_data(const Conv2dGeometry& g, const bf16* dy, const bf16* w, float* dx, ConvBackend backend) {
  dispatch_bf16(g, ConvPass::backward_data, false, backend, [&](Bf16Candidate c) {
    if (!c.widen) return onednn::backward_data(g, c.backend == ConvBackend::onednn_blocked, dy, w, dx);
    const Widened dyf(dy, y_size(g)), wf(w, w_size(g));
    conv2d_backward_data<float>(g, dyf.get(), wf.get(), dx, c.backend);
  });
}

void conv2d_backward_weights(const Conv2dGeometry& g, const bf16* dy, const bf16* x, float* dw, float* db,
                             ConvBackend backend) {
  dispatch_bf16(g, ConvPass::backward_weights, db != nullptr, backend, [&](Bf16Candidate c) {
    if (!c.widen) return onednn::backward_weights(g, c.backend == ConvBackend::onednn_blocked, dy, x, dw, db);
    const Widened dyf(dy, y_size(g)), xf(x, x_size(g));
    conv2d_backward_weights<float>(g, dyf.get(), xf.get(), dw, db, c.backend);
  });
}

template void conv2d_forward<float>(const Conv2dGeometry&, const float*, const float*, const float*, float*, ConvBackend);
template void conv2d_forward<double>(const Conv2dGeometry&, const double*, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_data<float>(const Conv2dGeometry&, const float*, const float*, float*, ConvBackend);
template void conv2d_backward_data<double>(const Conv2dGeometry&, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_weights<float>(const Conv2dGeometry&, const float*, const float*, float*, float*, ConvBackend);
template void conv2d_backward_weights<double>(const Conv2dGeometry&, const double*, const double*, double*, double*, ConvBackend);

}  // namespace braid::cpu
