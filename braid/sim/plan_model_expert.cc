// Expert parallelism in a plan's step (docs/moe.md): the all-to-alls of an
// MoE layer and the expert gradients' all-reduce over their replicas.
#include <fmt/format.h>

#include <algorithm>

#include "braid/sim/plan_builder.h"

namespace braid::sim::detail {

// The all-to-all of each expert group of every tensor rank (docs/moe.md:
// groups of X neighbouring data ranks), each rank sending `bytes` in all
// (its own block included), after prevs; prevs and tails become its end.
void Builder::expert_alltoall(int p, double bytes, const std::string& what, std::vector<std::vector<TaskId>>& prevs) {
  const int X = plan_.expert;
  for (int t = 0; t < plan_.tensor; ++t) {
    for (int g = 0; g < plan_.data / X; ++g) {
      CollectiveArgs args;
      for (int q = 0; q < X; ++q) {
        const int d = g * X + q;
        args.group.push_back(rank(d, t, p));
        const TaskId at = prevs[static_cast<size_t>(d)][static_cast<size_t>(t)];
        args.ready.push_back(at >= 0 ? at : sim_.join({}));
      }
      args.bytes = bytes;
      args.name = fmt::format("ep {} s{}", what, step_);
      const std::vector<TaskId> out = alltoall(sim_, args);
      for (int q = 0; q < X; ++q) {
        const int d = g * X + q;
        prevs[static_cast<size_t>(d)][static_cast<size_t>(t)] = out[static_cast<size_t>(q)];
        tail_[static_cast<size_t>(rank(d, t, p))] = out[static_cast<size_t>(q)];
      }
    }
  }
}

// An MoE layer under expert parallelism, on every rank of stage p. Forward:
// the attention and router, the counts' all-to-all (E int64), the rows'
// dispatch, the local experts over the rows routed to them (under balanced
// routing as many as the rank routed: N top_k, whatever X), the outputs'
// combine. Backward: the same exchanges in reverse, the experts' backward
// between them. The MoE MLP is whole on every tensor rank; the rest of the
// block is the tensor-parallel share.
void Builder::moe_pass(int l, bool forward, int m, int p, std::vector<std::vector<TaskId>>& prevs) {
  const LayerProfile& lp = layer(l);
  const int D = plan_.data, T = plan_.tensor;
  const double part = forward || !split() ? 1.0 : input_share(l);
  const double experts = forward ? lp.expert_forward : lp.expert_backward * part;
  const double rest = forward ? lp.forward - lp.expert_forward
                              : lp.backward * part - experts + (recomputed(l) ? lp.forward - lp.expert_forward : 0);
  const double rows = static_cast<double>(lp.dispatch_bytes);
  auto run = [&](double seconds, const char* category, const std::string& name) {
    for (int d = 0; d < D; ++d) {
      for (int t = 0; t < T; ++t) {
        TaskId& at = prevs[static_cast<size_t>(d)][static_cast<size_t>(t)];
        at = compute(rank(d, t, p), seconds, after(at), category, name);
      }
    }
  };
  auto attention_reduce = [&](const char* what) {
    if (T == 1 || role(l) != LayerRole::block) return;
    for (int d = 0; d < D; ++d) {
      auto& prev = prevs[static_cast<size_t>(d)];
      prev = tensor_allreduce(d, p, static_cast<double>(lp.output_bytes), prev, what);
      for (int t = 0; t < T; ++t) tail_[static_cast<size_t>(rank(d, t, p))] = prev[static_cast<size_t>(t)];
    }
  };
  if (forward) {
    run(rest * share(l), "forward", fmt::format("{} F{}", lp.name, m));
    attention_reduce("attention");
    expert_alltoall(p, 8.0 * static_cast<double>(lp.experts), fmt::format("counts m{}", m), prevs);
    expert_alltoall(p, rows, fmt::format("dispatch m{}", m), prevs);
    run(experts, "forward", fmt::format("{} experts F{}", lp.name, m));
    expert_alltoall(p, rows, fmt::format("combine m{}", m), prevs);
  } else {
    expert_alltoall(p, rows, fmt::format("combine grad m{}", m), prevs);
    run(experts, "backward", fmt::format("{} experts B{}", lp.name, m));
    expert_alltoall(p, rows, fmt::format("dispatch grad m{}", m), prevs);
    run(rest * share(l), "backward", fmt::format("{} B{}", lp.name, m));
    attention_reduce("attention grad");
  }
}

// Expert-data parallelism: each rank's E / X experts' gradients averaged
// over their replicas (the data / X ranks at the same place in their expert
// groups), after the non-expert buckets, from when the earliest MoE layer's
// backward is done. None with one expert group.
std::vector<TaskId> Builder::expert_allreduce(int p, int t, const std::vector<int>& mine,
                                     const std::vector<std::vector<TaskId>>& grads_done, std::vector<TaskId> done) {
  const int D = plan_.data, T = plan_.tensor, X = plan_.expert;
  double bytes = 0;
  int earliest = -1;
  for (const GradientReady& g : in_.profile.gradients) {
    if (!g.expert || std::find(mine.begin(), mine.end(), g.layer) == mine.end()) continue;
    bytes += static_cast<double>(g.bytes) / X;
    earliest = earliest < 0 ? g.layer : std::min(earliest, g.layer);
  }
  if (D / X == 1 || earliest < 0) return done;
  for (int q = 0; q < X; ++q) {
    CollectiveArgs args;
    for (int d = q; d < D; d += X) {
      const int r = rank(d, t, p);
      args.group.push_back(r);
      std::vector<TaskId> deps{plan_.overlap ? grads_done[static_cast<size_t>(earliest)][static_cast<size_t>(d * T + t)]
                                             : tail_[static_cast<size_t>(r)]};
      if (done[static_cast<size_t>(d)] >= 0) deps.push_back(done[static_cast<size_t>(d)]);
      args.ready.push_back(sim_.join(deps));
    }
    args.bytes = bytes;
    args.name = fmt::format("expert grads s{}", step_);
    const std::vector<TaskId> out = allreduce(sim_, args, algorithm(args.group, bytes));
    for (int j = 0, d = q; d < D; d += X, ++j) done[static_cast<size_t>(d)] = out[static_cast<size_t>(j)];
  }
  return done;
}

}  // namespace braid::sim::detail
