#include "braid/tensor/cpu/conv.h"

#include <fmt/format.h>

#include <atomic>
#include <tuple>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/autotune.h"

namespace braid::cpu {
namespace {

// Candidates: the three implementations x {the pool's threads, one thread}
// (one thread can win on shared cores, where a descheduled worker stalls every
// barrier; the second half is tried only when the pool has several threads).
constexpr int kCount = 6;
constexpr ConvBackend kCandidates[kCount] = {
    ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked,
    ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked};
constexpr bool kSingle[kCount] = {false, false, false, true, true, true};
// bf16: oneDNN's two flavours x {the pool's threads, one thread}.
constexpr int kCountBf16 = 4;
constexpr ConvBackend kCandidatesBf16[kCountBf16] = {ConvBackend::onednn_plain, ConvBackend::onednn_blocked,
                                                     ConvBackend::onednn_plain, ConvBackend::onednn_blocked};
constexpr bool kSingleBf16[kCountBf16] = {false, false, true, true};

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

Tuner& tuner() {
  static Tuner t;
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
  tuner().run(key, key.threads > 1 ? kCount : kCount / 2, [&](int slot) {
    SingleThread single(kSingle[slot]);
    run(kCandidates[slot]);
  });
}

// The same for bf16 products, over oneDNN's flavours only; run(blocked).
template <class Run>
void dispatch_bf16(const Conv2dGeometry& g, ConvPass pass, bool bias, ConvBackend backend, Run&& run) {
  if (backend == ConvBackend::im2col) {
    fail<ValueError>("conv2d ({}): bf16 runs on oneDNN only; im2col is f32 and f64", g.to_string());
  }
  if (backend == ConvBackend::automatic && g_default.load() != ConvBackend::im2col) backend = g_default.load();
  if (backend != ConvBackend::automatic) {
    run(backend == ConvBackend::onednn_blocked);
    return;
  }
  const Key key = make_key(g, pass, bias, /*bf16=*/true);
  tuner().run(key, key.threads > 1 ? kCountBf16 : kCountBf16 / 2, [&](int slot) {
    SingleThread single(kSingleBf16[slot]);
    run(kCandidatesBf16[slot] == ConvBackend::onednn_blocked);
  });
}

}  // namespace

std::string_view name(ConvBackend b) {
  switch (b) {
    case ConvBackend::automatic: return "automatic";
    case ConvBackend::im2col: return "im2col";
    case ConvBackend::onednn_plain: return "onednn_plain";
    case ConvBackend::onednn_blocked: return "onednn_blocked";
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
    const int slot = tuner().choice(make_key(g, pass, bias, bf16));
    if (slot >= 0) return bf16 ? kCandidatesBf16[slot] : kCandidates[slot];
  }
  return ConvBackend::automatic;
}

template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    ConvBackend backend) {
  dispatch<T>(g, ConvPass::forward, b != nullptr, backend, [&](ConvBackend r) {
    if constexpr (std::is_same_v<T, float>) {
      if (r != ConvBackend::im2col) return onednn::forward(g, r == ConvBackend::onednn_blocked, x, w, b, y);
    }
    im2col::forward(g, x, w, b, y);
  });
}

template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx,
                          ConvBackend backend) {
  dispatch<T>(g, ConvPass::backward_data, false, backend, [&](ConvBackend r) {
    if constexpr (std::is_same_v<T, float>) {
      if (r != ConvBackend::im2col) {
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
      if (r != ConvBackend::im2col) {
        return onednn::backward_weights(g, r == ConvBackend::onednn_blocked, dy, x, dw, db);
      }
    }
    im2col::backward_weights(g, dy, x, dw, db);
  });
}

void conv2d_forward(const Conv2dGeometry& g, const bf16* x, const bf16* w, const float* b, float* y,
                    ConvBackend backend) {
  dispatch_bf16(g, ConvPass::forward, b != nullptr, backend,
                [&](bool blocked) { onednn::forward(g, blocked, x, w, b, y); });
}

void conv2d_backward_data(const Conv2dGeometry& g, const bf16* dy, const bf16* w, float* dx, ConvBackend backend) {
  dispatch_bf16(g, ConvPass::backward_data, false, backend,
                [&](bool blocked) { onednn::backward_data(g, blocked, dy, w, dx); });
}

void conv2d_backward_weights(const Conv2dGeometry& g, const bf16* dy, const bf16* x, float* dw, float* db,
                             ConvBackend backend) {
  dispatch_bf16(g, ConvPass::backward_weights, db != nullptr, backend,
                [&](bool blocked) { onednn::backward_weights(g, blocked, dy, x, dw, db); });
}

template void conv2d_forward<float>(const Conv2dGeometry&, const float*, const float*, const float*, float*, ConvBackend);
template void conv2d_forward<double>(const Conv2dGeometry&, const double*, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_data<float>(const Conv2dGeometry&, const float*, const float*, float*, ConvBackend);
template void conv2d_backward_data<double>(const Conv2dGeometry&, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_weights<float>(const Conv2dGeometry&, const float*, const float*, float*, float*, ConvBackend);
template void conv2d_backward_weights<double>(const Conv2dGeometry&, const double*, const double*, double*, double*, ConvBackend);

}  // namespace braid::cpu
