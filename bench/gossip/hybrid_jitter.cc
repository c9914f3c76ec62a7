// Timeout-hybrid synchronisation against waiting for every gradient when
// replicas hiccup now and then (a noisy neighbour, a page-fault storm): P
// ranks as threads over the in-process transport; every step each rank
// "computes" for C ms and, with probability p, stalls D ms more, drawn from a
// fixed seed so every plan meets the same stalls; its gradient is a vector of
// N f32 entries. Prints per plan the wall time per step, the gradients late
// per step and the coordinator's wait. A plan with catch_up = skip (the
// default) skips the compute of a step already closed without the rank.
// Ranks sleep rather than spin, so the figures hold on a loaded machine.
// The plans "via all-reduce" close each step without a coordinator
// (hybrid.via = allreduce): their deadline counts from the previous aggregate,
// so it is the compute time plus the slack the coordinator's plans wait.
//
//   build/bin/hybrid_jitter [P=4] [STEPS=200] [C_MS=5] [STALL_P=0.05] [D_MS=50] [N=262144]
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/base/rng.h"
#include "braid/comm/transport/inproc.h"
#include "braid/parallel/hybrid/deadline_allreduce.h"
#include "braid/parallel/hybrid/hybrid.h"

using namespace braid;
using namespace braid::parallel::hybrid;

namespace {

struct Plan {
  const char* name;
  HybridOptions options;
};

struct Result {
  double ms_per_step = 0;
  HybridTotals totals;
  double waited_ms = 0;
};

template <class Hybrid>
Result run(int ranks, int steps, double compute_ms, double stall_p, double stall_ms, int64_t n, const Plan& plan) {
  auto world = comm::InprocWorld::create(ranks);
  std::vector<Result> out(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      comm::Communicator comm(std::shared_ptr<comm::Transport>(world->transport(r)));
      const Tensor w = Tensor::zeros({n});
      w.set_requires_grad();
      Hybrid h(comm, plan.options);
      h.setup({{"w", w}}, {}, {});
      Generator stalls(17, static_cast<uint64_t>(r));  // the same stalls for every plan
      const auto start = Clock::now();
      for (int s = 0; s < steps; ++s) {
        h.before_forward();
        double ms = compute_ms;
        if (stalls.uniform_f64() < stall_p) ms += stall_ms;  // drawn every step, so every plan meets the same
        if (!h.step_decided()) {  // catch_up = skip: a closed step is not computed
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
          w.set_grad(Tensor::full({n}, 1e-3 * (r + 1)));
        }
        h.combine_gradients();
        h.after_step();  // the optimizer's update does not matter here
      }
      h.finish();
      Result& res = out[static_cast<size_t>(r)];
      res.ms_per_step = 1e3 * seconds_since(start) / steps;
      res.totals = h.totals();
      res.waited_ms = h.stats()["waited_ms_per_step"].template get<double>();
    });
  }
  for (auto& t : threads) t.join();
  return out[0];
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i, double fallback) { return argc > i ? std::stod(argv[i]) : fallback; };
  const int ranks = static_cast<int>(arg(1, 4)), steps = static_cast<int>(arg(2, 200));
  const double compute_ms = arg(3, 5), stall_p = arg(4, 0.05), stall_ms = arg(5, 50);
  const auto n = static_cast<int64_t>(arg(6, 262144));
  using std::chrono::milliseconds;
  const std::vector<Plan> plans = {
      {"wait for all (sync SGD)", {.wait = milliseconds(0)}},
      {"deadline 2 ms, drop", {.wait = milliseconds(2), .late = Late::drop}},
      {"deadline 2 ms, stale", {.wait = milliseconds(2), .late = Late::stale}},
      {"deadline 10 ms, drop", {.wait = milliseconds(10), .late = Late::drop}},
      {"2 ms, drop, compute", {.wait = milliseconds(2), .late = Late::drop, .catch_up = CatchUp::compute}},
      {"2 ms, stale, compute", {.wait = milliseconds(2), .late = Late::stale, .catch_up = CatchUp::compute}},
      {"via all-reduce, C+2 ms, drop", {.wait = milliseconds(2) + std::chrono::duration_cast<Duration>(
                                            std::chrono::duration<double, std::milli>(compute_ms)),
                                        .late = Late::drop, .via = Via::allreduce}},
      {"via all-reduce, C+2 ms, stale", {.wait = milliseconds(2) + std::chrono::duration_cast<Duration>(
                                             std::chrono::duration<double, std::milli>(compute_ms)),
                                         .late = Late::stale, .via = Via::allreduce}},
  };
  std::printf("%d ranks, %d steps of %.0f ms compute; each rank stalls %.0f ms more with probability %.2f per step; "
              "%lld f32 entries\n", ranks, steps, compute_ms, stall_ms, stall_p, static_cast<long long>(n));
  std::printf("%-30s %9s %12s %12s %12s %8s %12s\n", "plan", "ms/step", "late/step", "stale/step", "skipped/step",
              "max lag", "waited ms");
  for (const Plan& p : plans) {
    auto* fn = p.options.via == Via::allreduce ? &run<DeadlineAllreduce> : &run<TimeoutHybrid>;
    const Result r = fn(ranks, steps, compute_ms, stall_p, stall_ms, n, p);
    const double s = static_cast<double>(r.totals.steps);
    std::printf("%-30s %9.2f %12.3f %12.3f %12.3f %8lld %12.2f\n", p.name, r.ms_per_step,
                static_cast<double>(r.totals.late) / s, static_cast<double>(r.totals.stale) / s,
                static_cast<double>(r.totals.skipped) / s, static_cast<long long>(r.totals.max_lag), r.waited_ms);
  }
  return 0;
}
