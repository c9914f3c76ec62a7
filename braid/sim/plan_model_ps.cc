// Parameter servers in a plan's step: push, the servers' update, pull.
#include <fmt/format.h>

#include <algorithm>

#include "braid/sim/plan_builder.h"

namespace braid::sim::detail {

// One step of a worker under parameter servers: forward and backward, the
// gradient pushed to every server in shards, the servers' update (bsp: once
// every worker of the clock has pushed; otherwise per push), the shards
// pulled back. Passes over the whole model cost gamma per byte each, as
// parallel/parameter_server.cc and the server make them: the worker adds
// the gradients into its push buffer and zeroes the next one, the server
// copies a shard into each pull's reply, the worker copies the pulled
// weights into the parameters.
std::vector<TaskId> Builder::ps_step() {
  const int S = plan_.servers, W = plan_.workers();
  const double model = static_cast<double>(in_.profile.parameter_bytes);
  const double shard = model / S;
  const double gamma = sim_.cluster().intra.gamma;
  std::vector<std::vector<TaskId>> pushes(static_cast<size_t>(S));  // [server][worker]
  std::vector<TaskId> backward_end(static_cast<size_t>(W));
  for (int w = 0; w < W; ++w) {
    const int r = S + w;
    std::vector<TaskId> prev{tail_[static_cast<size_t>(r)]};
    for (int m = 0; m < plan_.microbatches; ++m) {
      for (int l = 0; l < layers_; ++l) layer_pass(l, true, m, w, 0, prev);
      for (int l = layers_ - 1; l >= 0; --l) layer_pass(l, false, m, w, 0, prev);
    }
    const TaskId pack = compute(r, 2 * model * gamma, after(prev[0]), "optimizer", fmt::format("pack s{}", step_));
    backward_end[static_cast<size_t>(w)] = pack;
    for (int s = 0; s < S; ++s) {
      pushes[static_cast<size_t>(s)].push_back(
          sim_.transfer(r, s, shard, {pack}, {"net", fmt::format("push s{}", step_)}, /*awaited=*/true));
    }
  }
  // The servers' update of a shard: add the pushed gradient, then the
  // updater's pass (the workers' optimizer update, per shard).
  const double update = in_.profile.update / S;
  std::vector<std::vector<TaskId>> pulls(static_cast<size_t>(W));
  for (int s = 0; s < S; ++s) {
    const auto& in = pushes[static_cast<size_t>(s)];
    if (plan_.consistency == "bsp") {
      const TaskId u =
          sim_.compute(s, W * shard * gamma + update, in, {"optimizer", fmt::format("update s{}", step_)});
      for (int w = 0; w < W; ++w) {
        // Each worker's requests are served by a thread of their own (a stream per worker).
        const TaskId reply = sim_.compute(s, shard * gamma, {u}, {"comm", fmt::format("reply w{} s{}", w, step_)}, 2 + w);
        pulls[static_cast<size_t>(w)].push_back(
            sim_.transfer(s, S + w, shard, {reply}, {"net", fmt::format("pull s{}", step_)}, /*awaited=*/true));
      }
    } else {
      // Asynchronous: each push is applied on arrival (a stream per worker,
      // so one worker's late push does not hold the others' back).
      for (int w = 0; w < W; ++w) {
        // Add the push, the updater's pass, copy the reply.
        const TaskId u = sim_.compute(s, update + 2 * shard * gamma, {in[static_cast<size_t>(w)]},
                                      {"optimizer", fmt::format("update w{} s{}", w, step_)}, 2 + w);
        pulls[static_cast<size_t>(w)].push_back(
            sim_.transfer(s, S + w, shard, {u}, {"net", fmt::format("pull s{}", step_)}, /*awaited=*/true));
      }
    }
  }
  std::vector<TaskId> ends;
  for (int w = 0; w < W; ++w) {
    const int r = S + w;
    const TaskId pulled = sim_.join(pulls[static_cast<size_t>(w)], {"join", fmt::format("step {}", step_)});
    const TaskId end = compute(r, model * gamma, {pulled}, "optimizer", fmt::format("unpack s{}", step_));
    ends.push_back(end);
  }
  return ends;
}

}  // namespace braid::sim::detail
