// calibrate(): measures the chooser's alpha, beta and gamma at start-up.
//
// Ranks 0 and 1 ping-pong a small (8-byte) and a large (1 MiB) message:
// alpha = half the small round trip, beta = (half the large round trip -
// alpha) / bytes. Rank 0 also times reduce_into on 1 MiB of f32 for gamma.
// Rank 0 broadcasts its figures so every rank's chooser agrees.
#include <algorithm>
#include <array>

#include "braid/comm/communicator_impl.h"

namespace braid::comm {

namespace {

// Seconds per round trip of `bytes`, best of `reps` (the minimum filters out
// scheduler noise; the model wants the uncontended cost).
double round_trip(Group& g, int peer, std::span<std::byte> buf, int reps, bool initiator) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    if (initiator) {
      g.wait(g.send(peer, buf, 1), peer);
      g.wait(g.recv(peer, buf, 1), peer);
    } else {
      g.wait(g.recv(peer, buf, 1), peer);
      g.wait(g.send(peer, buf, 1), peer);
    }
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

Work Communicator::calibrate(TimeoutOptions o) {
  Impl& m = impl();
  return m.submit({.op = "calibrate", .bytes = 1 << 20}, m.timeout_or_default(o.timeout), [&m](Group& g) {
    if (g.size() < 2) return;
    constexpr size_t kLarge = 1 << 20;  // bytes
    std::array<double, 3> figures{};    // alpha, beta, gamma
    if (g.rank() < 2) {
      std::span<std::byte> buf = g.scratch().get(2 * kLarge);
      const int peer = 1 - g.rank();
      const double small = round_trip(g, peer, buf.first(8), 50, g.rank() == 0);
      const double large = round_trip(g, peer, buf.first(kLarge), 8, g.rank() == 0);
      const double alpha = small / 2;
      figures = {alpha, std::max(1e-13, (large / 2 - alpha) / kLarge), 0};
      if (g.rank() == 0) {
        const size_t n = kLarge / sizeof(float);
        std::fill_n(reinterpret_cast<float*>(buf.data()), 2 * n, 1.0f);
        double best = 1e30;
        for (int i = 0; i < 5; ++i) {
          const auto t0 = Clock::now();
          reduce_into(DType::f32, Op::sum, buf.data(), buf.data() + kLarge, n);
          best = std::min(best, seconds_since(t0));
        }
        figures[2] = std::max(1e-13, best / kLarge);
      }
    }
    binomial_broadcast(g, {reinterpret_cast<std::byte*>(figures.data()), sizeof(figures)}, 0);
    std::lock_guard lock(m.cost_mu);
    m.cost = {.alpha = figures[0], .beta = figures[1], .gamma = figures[2]};
  });
}

}  // namespace braid::comm
