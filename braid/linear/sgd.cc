#include "braid/linear/sgd.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <numeric>
#include <thread>

#include "braid/base/error.h"
#include "braid/linear/coordinate_descent.h"

namespace braid::linear_model {

namespace {

// Plain loads and stores, for coordinates no other thread touches.
struct Plain {
  static double load(const double& v) { return v; }
  static void store(double& v, double x) { v = x; }
};
// Hogwild!'s shared weights: relaxed atomics compile to the same moves on
// x86-64 but make the intended races defined (and invisible to TSan).
struct Relaxed {
  static double load(const double& v) { return std::atomic_ref(const_cast<double&>(v)).load(std::memory_order_relaxed); }
  static void store(double& v, double x) { std::atomic_ref(v).store(x, std::memory_order_relaxed); }
};

// What every SGD variant shares: the per-feature regulariser weights and the
// one example update, so serial and threaded runs do the same arithmetic.
struct SgdSetup {
  const Problem& p;
  const Examples& train;
  std::vector<double> spread;  // n / d_j

  SgdSetup(const Problem& problem, const Examples& data) : p(problem), train(data) {
    std::vector<int64_t> count(static_cast<size_t>(data.x.cols), 0);
    for (int32_t j : data.x.index) ++count[j];
    spread.resize(count.size());
    for (size_t j = 0; j < count.size(); ++j)
      spread[j] = count[j] ? static_cast<double>(data.size()) / static_cast<double>(count[j]) : 0;
  }

  template <class Access>
  void update(int64_t r, double eta, double* w) const {
    const auto row = train.x.row(r);
    double z = 0;
    for (size_t k = 0; k < row.index.size(); ++k) z += row.value[k] * Access::load(w[row.index[k]]);
    const double g = loss_derivative(p.loss, train.y[r], z);
    for (size_t k = 0; k < row.index.size(); ++k) {
      const int32_t j = row.index[k];
      const double wj = Access::load(w[j]);
      double next = wj - eta * (g * row.value[k] + p.reg.l2 * spread[j] * wj);
      if (p.reg.l1 != 0) next = soft_threshold(next, eta * p.reg.l1 * spread[j]);
      Access::store(w[j], next);
    }
  }

  double eta(const SolverOptions& o, int epoch) const { return o.step * std::pow(o.step_decay, epoch - 1); }
};

// The epoch loop every variant shares; `pass(order, eta, w)` runs one epoch.
template <class Pass>
Result run_epochs(const SgdSetup& s, EpochClock& clock, const SolverOptions& o, Pass pass) {
  if (o.step <= 0) fail<ConfigError>("sgd step must be > 0, got {}", o.step);
  std::vector<double> w(static_cast<size_t>(s.train.x.cols), 0.0);
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<int64_t> order = data::permutation(s.train.size(), o.seed, epoch_stream(epoch, 0));
    pass(order, s.eta(o, epoch), w.data());
    clock.pause();
    if (!clock.end_epoch(epoch, w, primal_objective(s.p, s.train, w))) break;
  }
  return {std::move(w), clock.take_history()};
}

int thread_count(const SolverOptions& o) {
  if (o.threads < 1) fail<ConfigError>("threads must be >= 1, got {}", o.threads);
  return o.threads;
}

// Union-find over a batch's examples (positions 0..B-1), path halving.
int64_t find(std::vector<int64_t>& parent, int64_t a) {
  while (parent[a] != a) a = parent[a] = parent[parent[a]];
  return a;
}

// One batch's work: the examples each thread runs, components kept whole and
// in permutation order.
using BatchPlan = std::vector<std::vector<int64_t>>;

// Scratch of one planning thread, reused batch after batch.
struct PlanScratch {
  std::vector<int64_t> owner, stamp;  // per feature: the batch position that claimed it, in batch `stamp`
  std::vector<int64_t> parent, slot, cost, thread_of;
};

// Splits examples `batch` (a slice of the permutation) into conflict-free
// components and deals them to `threads` threads: each component, in order of
// first appearance, to the least loaded thread so far (by nonzeros). A
// thread's list keeps batch order; components dealt to one thread interleave
// there, which is harmless since they share no coordinate, while each
// component's own examples stay in permutation order.
void plan_batch(const Examples& train, std::span<const int64_t> batch, int threads, int64_t batch_id, PlanScratch& s,
                BatchPlan& plan) {
  const auto b = static_cast<int64_t>(batch.size());
  s.parent.resize(static_cast<size_t>(b));
  std::iota(s.parent.begin(), s.parent.end(), 0);
  for (int64_t i = 0; i < b; ++i) {
    for (int32_t j : train.x.row(batch[i]).index) {
      if (s.stamp[j] != batch_id) {
        s.stamp[j] = batch_id, s.owner[j] = i;
      } else {
        const int64_t x = find(s.parent, i), y = find(s.parent, s.owner[j]);
        if (x != y) s.parent[std::max(x, y)] = std::min(x, y);  // the root stays the earliest example
      }
    }
  }
  s.slot.assign(static_cast<size_t>(b), -1);
  s.cost.clear();
  for (int64_t i = 0; i < b; ++i) {  // component sizes, numbered by first appearance
    const int64_t root = find(s.parent, i);
    if (s.slot[root] < 0) s.slot[root] = static_cast<int64_t>(s.cost.size()), s.cost.push_back(0);
    s.cost[s.slot[root]] += train.x.start[batch[i] + 1] - train.x.start[batch[i]] + 1;
  }
  std::vector<int64_t> load(static_cast<size_t>(threads), 0);
  s.thread_of.resize(s.cost.size());
  for (size_t c = 0; c < s.cost.size(); ++c) {
    const auto t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[t] += s.cost[c];
    s.thread_of[c] = static_cast<int64_t>(t);
  }
  plan.resize(static_cast<size_t>(threads));
  for (auto& list : plan) list.clear();
  for (int64_t i = 0; i < b; ++i) plan[s.thread_of[s.slot[find(s.parent, i)]]].push_back(batch[i]);
}

}  // namespace

Result solve_sgd(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                 const Monitor& monitor) {
  EpochClock clock(o, p, test, monitor);
  const SgdSetup s(p, train);
  return run_epochs(s, clock, o, [&](const std::vector<int64_t>& order, double eta, double* w) {
    for (int64_t r : order) s.update<Plain>(r, eta, w);
  });
}

Result solve_hogwild(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                     const Monitor& monitor) {
  EpochClock clock(o, p, test, monitor);
  const SgdSetup s(p, train);
  const int threads = thread_count(o);
  return run_epochs(s, clock, o, [&](const std::vector<int64_t>& order, double eta, double* w) {
    auto slice = [&](int t) {
      const auto [lo, hi] = part_range(static_cast<int64_t>(order.size()), threads, t);
      for (int64_t i = lo; i < hi; ++i) s.update<Relaxed>(order[i], eta, w);
    };
    std::vector<std::jthread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(slice, t);
    slice(0);
  });
}

Result solve_cyclades(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                      const Monitor& monitor) {
  EpochClock clock(o, p, test, monitor);
  const SgdSetup s(p, train);
  const int threads = thread_count(o);
  if (o.batch < 1) fail<ConfigError>("cyclades batch must be >= 1, got {}", o.batch);
  const auto d = static_cast<size_t>(train.x.cols);
  std::vector<PlanScratch> scratch(static_cast<size_t>(threads));
  for (auto& sc : scratch) sc.owner.assign(d, 0), sc.stamp.assign(d, -1);
  std::vector<BatchPlan> plans;
  int64_t next_id = 0;  // batch ids keep growing across epochs so stamps never need clearing
  return run_epochs(s, clock, o, [&](const std::vector<int64_t>& order, double eta, double* w) {
    const auto n = static_cast<int64_t>(order.size());
    const int64_t batches = (n + o.batch - 1) / o.batch;
    plans.resize(static_cast<size_t>(batches));
    const int64_t first_id = next_id;
    next_id += batches;
    // Planning is independent per batch: threads plan different batches, then
    // all run batch after batch with a barrier between them.
    std::barrier sync(threads);
    auto work = [&](int t) {
      for (int64_t k = t; k < batches; k += threads) {
        const int64_t lo = k * o.batch, hi = std::min(n, lo + o.batch);
        plan_batch(train, std::span(order).subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo)), threads,
                   first_id + k, scratch[t], plans[k]);
      }
      sync.arrive_and_wait();
      for (int64_t k = 0; k < batches; ++k) {
        for (int64_t r : plans[k][t]) s.update<Plain>(r, eta, w);
        sync.arrive_and_wait();
      }
    };
    std::vector<std::jthread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
  });
}

}  // namespace braid::linear_model
