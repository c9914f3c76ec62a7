// How much of the ring's communication the block computations hide:
//
//   braid launch -n C -- build/bin/ring_overlap [T] [B] [H] [D] [REPS] [TRANSPORT]
//
// Each rank, on one intra-op thread, times forward + backward of
// context_parallel::ring_attention on its T / C tokens (zig-zag, causal, f32),
// and then the same fused kernel calls with no transfers: every (query chunk,
// key chunk) pair the ring attends on this rank, forward and backward, run on
// this rank's own block (each pair's forward once, its backward from that
// forward's out and lse). Medians of REPS (default 5) after one warm-up, the
// ranks lined up by a barrier before each; rank 0 prints one JSON line with
// both, their ratio (1.0: the transfers fully hidden) and the slowest rank's.
// TRANSPORT: shm (default) or tcp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/base/median.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/parallel/context_parallel/layout.h"
#include "braid/parallel/context_parallel/ring_attention.h"
#include "braid/parallel/process_group.h"
#include "braid/tensor/cpu/attention.h"

using namespace braid;
using parallel::context_parallel::ContextLayout;

namespace {

Tensor random(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (float& x : v) x = static_cast<float>(g.normal());
  return Tensor::from_vector(v, shape);
}

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The ring's kernel calls on this rank, each against this rank's own chunks
// (the same shapes and masks, no messages).
void compute_alone(const ContextLayout& L, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
  const int per = L.chunks_per_rank();
  const int64_t c = q.size(1) / per;
  const double scale = 1 / std::sqrt(static_cast<double>(q.size(3)));
  auto chunk = [&](const Tensor& x, int i) { return contiguous(slice(x, 1, i * c, (i + 1) * c)); };
  struct Pair {
    Tensor q, k, v, dout;
    cpu::AttentionParams p;
    cpu::AttentionForward f;
  };
  std::vector<Pair> pairs;
  for (int t = 0; t < L.size; ++t) {  // forward
    const int owner = (L.rank - t + L.size) % L.size;
    for (int i = 0; i < per; ++i) {
      for (int j = 0; j < per; ++j) {
        const int gq = L.chunk_of(L.rank, i), gk = L.chunk_of(owner, j);
        if (gk > gq) continue;
        Pair x{chunk(q, i), chunk(k, j), chunk(v, j), chunk(dout, i), {.causal = gk == gq, .scale = scale}, {}};
        x.f = cpu::attention_forward(x.q, x.k, x.v, x.p);
        pairs.push_back(std::move(x));
      }
    }
  }
  for (const Pair& x : pairs) cpu::attention_backward(x.dout, x.q, x.k, x.v, x.f.out, x.f.lse, x.p);  // backward
}

}  // namespace

int main(int argc, char** argv) try {
  const int64_t t = argc > 1 ? std::stoll(argv[1]) : 4096, b = argc > 2 ? std::stoll(argv[2]) : 1,
                h = argc > 3 ? std::stoll(argv[3]) : 4, d = argc > 4 ? std::stoll(argv[4]) : 64;
  const int reps = argc > 5 ? std::stoi(argv[5]) : 5;
  set_num_threads(1);
  auto pg = parallel::ProcessGroup::join({.transport = argc > 6 ? argv[6] : "shm"});
  comm::Communicator cp = pg->comm();
  const ContextLayout layout{.size = cp.size(), .rank = cp.rank(), .zigzag = true};
  layout.check_length(t, "ring_overlap");
  const Tensor q = layout.shard(random({b, t, h, d}, 1), 1), k = layout.shard(random({b, t, h, d}, 2), 1),
               v = layout.shard(random({b, t, h, d}, 3), 1), w = layout.shard(random({b, t, h, d}, 4), 1);
  auto barrier = [&] { cp.barrier().wait(Deadline::after(std::chrono::seconds(120))); };
  auto ring_step = [&] {
    Tensor ql = q.clone(), kl = k.clone(), vl = v.clone();
    for (Tensor* x : {&ql, &kl, &vl}) x->set_requires_grad(true);
    backward(sum(mul(parallel::context_parallel::ring_attention(ql, kl, vl, cp), w)));
  };
  std::vector<double> ring, alone;
  for (int r = 0; r <= reps; ++r) {
    barrier();
    const double a = seconds_of(ring_step);
    barrier();
    const double c = seconds_of([&] { compute_alone(layout, q, k, v, w); });
    if (r > 0) ring.push_back(a), alone.push_back(c);  // rep 0 warms up
  }
  // Every rank's medians, so rank 0 reports the slowest.
  std::vector<double> mine{upper_median(ring), upper_median(alone)}, all(2 * static_cast<size_t>(cp.size()));
  cp.allgather(mine, all).wait(Deadline::after(std::chrono::seconds(60)));
  if (cp.rank() == 0) {
    double worst_ring = 0, worst_alone = 0;
    for (int r = 0; r < cp.size(); ++r) {
      worst_ring = std::max(worst_ring, all[2 * static_cast<size_t>(r)]);
      worst_alone = std::max(worst_alone, all[2 * static_cast<size_t>(r) + 1]);
    }
    const nlohmann::json out = {{"ranks", cp.size()}, {"T", t}, {"B", b}, {"H", h}, {"D", d},
                                {"transport", pg->transport_name()}, {"reps", reps},
                                {"ring_ms", mine[0] * 1e3}, {"alone_ms", mine[1] * 1e3},
                                {"ratio", mine[0] / mine[1]}, {"slowest_ring_ms", worst_ring * 1e3},
                                {"slowest_alone_ms", worst_alone * 1e3}, {"slowest_ratio", worst_ring / worst_alone}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ring_overlap: %s\n", e.what());
  return 1;
}
