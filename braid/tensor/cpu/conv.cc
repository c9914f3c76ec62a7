#include "braid/tensor/cpu/conv.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "braid/base/thread_pool.h"

namespace braid::cpu {
namespace {

// Timed calls per implementation before the autotuner decides. The first
// oneDNN call of a shape also builds its primitives, so the minimum needs at
// least two; three keeps one noisy run (shared cores) from deciding.
constexpr int kTrials = 3;
// Candidates: the three implementations x {the pool's threads, one thread}
// (one thread can win on shared cores, where a descheduled worker stalls every
// barrier; the second half is tried only when the pool has several threads).
constexpr int kCount = 6;
constexpr ConvBackend kCandidates[kCount] = {
    ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked,
    ConvBackend::im2col, ConvBackend::onednn_plain, ConvBackend::onednn_blocked};
constexpr bool kSingle[kCount] = {false, false, false, true, true, true};

// Runs the calling thread's parallel regions on one thread while alive.
class SingleThread {
 public:
  explicit SingleThread(bool on) : saved_(on ? num_threads() : 0) {
    if (on) set_num_threads(1);
  }
  ~SingleThread() {
    if (saved_ > 0) set_num_threads(saved_);
  }
  SingleThread(const SingleThread&) = delete;
  SingleThread& operator=(const SingleThread&) = delete;

 private:
  int saved_;
};

struct Key {
  ConvPass pass;
  bool bias;
  int threads;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  auto tie() const {
    return std::tie(pass, bias, threads, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups);
  }
  bool operator<(const Key& k) const { return tie() < k.tie(); }
};

Key make_key(const Conv2dGeometry& g, ConvPass pass, bool bias) {
  return {pass, bias, num_threads(), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.stride_h, g.stride_w,
          g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
}

struct Tuning {
  int calls[kCount] = {};
  double best[kCount] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};  // seconds
  int choice = -1;  // settled candidate
};

struct Tuner {
  std::mutex mu;
  std::map<Key, Tuning> table;
};

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
  Tuner& t = tuner();
  const Key key = make_key(g, pass, bias);
  const int count = key.threads > 1 ? kCount : kCount / 2;
  int slot;
  bool settled;
  {
    std::lock_guard lock(t.mu);
    Tuning& tu = t.table[key];
    settled = tu.choice >= 0;
    slot = tu.choice;
    if (!settled) {
      slot = 0;
      for (int i = 1; i < count; ++i) {
        if (tu.calls[i] < tu.calls[slot]) slot = i;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  {
    SingleThread single(kSingle[slot]);
    run(kCandidates[slot]);
  }
  if (settled) return;
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard lock(t.mu);
  Tuning& tu = t.table[key];
  if (tu.choice >= 0) return;
  tu.calls[slot] += 1;
  tu.best[slot] = std::min(tu.best[slot], sec);
  bool done = true;
  int winner = 0;
  for (int i = 0; i < count; ++i) {
    done = done && tu.calls[i] >= kTrials;
    if (tu.best[i] < tu.best[winner]) winner = i;
  }
  if (done) tu.choice = winner;
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

ConvBackend conv_choice(const Conv2dGeometry& g, ConvPass pass) {
  Tuner& t = tuner();
  std::lock_guard lock(t.mu);
  for (bool bias : {true, false}) {
    auto it = t.table.find(make_key(g, pass, bias));
    if (it != t.table.end() && it->second.choice >= 0) return kCandidates[it->second.choice];
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

template void conv2d_forward<float>(const Conv2dGeometry&, const float*, const float*, const float*, float*, ConvBackend);
template void conv2d_forward<double>(const Conv2dGeometry&, const double*, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_data<float>(const Conv2dGeometry&, const float*, const float*, float*, ConvBackend);
template void conv2d_backward_data<double>(const Conv2dGeometry&, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_weights<float>(const Conv2dGeometry&, const float*, const float*, float*, float*, ConvBackend);
template void conv2d_backward_weights<double>(const Conv2dGeometry&, const double*, const double*, double*, double*, ConvBackend);

}  // namespace braid::cpu
