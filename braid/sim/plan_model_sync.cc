// The data axis of a plan's step: gradient buckets, codecs, the update, local SGD.
#include <fmt/format.h>

#include <algorithm>

#include "braid/sim/plan_builder.h"

namespace braid::sim::detail {

// After stage p's last backward on tensor rank t of every replica: the
// data axis's gradient all-reduce in buckets, then the update.
void Builder::finish_stage(int p, int t, const std::vector<std::vector<TaskId>>& grads_done, std::vector<TaskId>& ends) {
  const int D = plan_.data, T = plan_.tensor;
  const std::vector<int> mine = layers_of(p);  // its chunks' layers, with interleaving
  std::vector<TaskId> done(static_cast<size_t>(D), -1);
  if (D > 1 && plan_.strategy == "allreduce") {
    // Buckets fill in reverse registration order (bucketed_allreduce.h),
    // layer by layer here: a bucket is ready when its earliest layer's
    // backward is done (or all backward, without overlap).
    struct Bucket {
      double bytes = 0;
      int earliest = 0;
    };
    std::vector<Bucket> buckets;
    for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
      const int l = *it;
      for (const GradientReady& g : in_.profile.gradients) {
        if (g.layer != l || (g.expert && plan_.expert > 1)) continue;
        if (buckets.empty() || buckets.back().bytes >= plan_.bucket_bytes) buckets.push_back({0, l});
        buckets.back().bytes += static_cast<double>(g.bytes) * share(l);
        buckets.back().earliest = l;
      }
    }
    for (size_t k = 0; k < buckets.size(); ++k) {
      CollectiveArgs args;
      std::vector<TaskId> ready;
      for (int d = 0; d < D; ++d) {
        const int r = rank(d, t, p);
        args.group.push_back(r);
        std::vector<TaskId> deps{
            plan_.overlap ? grads_done[static_cast<size_t>(buckets[k].earliest)][static_cast<size_t>(d * T + t)]
                          : tail_[static_cast<size_t>(r)]};
        if (done[static_cast<size_t>(d)] >= 0) deps.push_back(done[static_cast<size_t>(d)]);
        ready.push_back(sim_.join(deps));
      }
      done = bucket_allreduce(args, ready, buckets[k].bytes, k);
    }
    if (plan_.expert > 1) done = expert_allreduce(p, t, mine, grads_done, done);
  }
  double update = 0;
  for (int l : mine) {
    // Under expert parallelism a rank updates E / X of each MoE layer's experts.
    const LayerProfile& lp = layer(l);
    update += exchanged(l) ? (lp.update - lp.expert_update) * share(l) + lp.expert_update / plan_.expert
                           : lp.update * share(l);
  }
  for (int d = 0; d < D; ++d) {
    const int r = rank(d, t, p);
    std::vector<TaskId> deps = after(tail_[static_cast<size_t>(r)]);
    if (done[static_cast<size_t>(d)] >= 0) deps.push_back(done[static_cast<size_t>(d)]);
    ends[static_cast<size_t>(r - plan_.servers)] = compute(r, update, deps, "optimizer", "update");
  }
  if (plan_.strategy == "local_sgd" && D > 1 && (step_ + 1) % plan_.local_sgd_period == 0) {
    // Averaging the parameters after the step; the next step waits for it.
    double bytes = 0;
    for (int l : mine) bytes += static_cast<double>(layer(l).parameter_bytes) * share(l);
    CollectiveArgs args;
    for (int d = 0; d < D; ++d) args.group.push_back(rank(d, t, p));
    args.bytes = bytes;
    for (int d = 0; d < D; ++d) args.ready.push_back(ends[static_cast<size_t>(rank(d, t, p) - plan_.servers)]);
    args.name = fmt::format("average s{}", step_);
    const std::vector<TaskId> avg = allreduce(sim_, args, algorithm(args.group, bytes));
    for (int d = 0; d < D; ++d) {
      const int r = rank(d, t, p);
      ends[static_cast<size_t>(r - plan_.servers)] = tail_[static_cast<size_t>(r)] = avg[static_cast<size_t>(d)];
    }
  }
}

// One bucket's average on the data axis, through the codec if there is one.
std::vector<TaskId> Builder::bucket_allreduce(CollectiveArgs args, std::vector<TaskId> ready, double bytes, size_t k) {
  const CodecCost& c = in_.codec;
  const bool coded = plan_.codec != "none" && c.raw_bytes > 0;
  const double ratio = coded ? c.wire_bytes / c.raw_bytes : 1;
  const double scale = coded ? bytes / c.raw_bytes : 0;  // codec costs grow with the bucket
  const int D = static_cast<int>(args.group.size());
  if (coded) {
    for (size_t i = 0; i < ready.size(); ++i) {
      ready[i] = sim_.compute(args.group[i], c.encode * scale, {ready[i]}, {"comm", fmt::format("encode b{}", k)}, 1);
    }
  }
  args.ready = ready;
  args.name = fmt::format("bucket {} s{}", k, step_);
  std::vector<TaskId> out;
  if (!coded || c.reduces_encoded) {
    args.bytes = bytes * ratio;
    out = allreduce(sim_, args, algorithm(args.group, args.bytes));
  } else {
    args.bytes = bytes * ratio * D;  // every rank's message, gathered
    args.reduce = false;
    out = allgather(sim_, args);
  }
  if (coded) {
    const double decodes = c.reduces_encoded ? 1 : D;
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = sim_.compute(args.group[i], c.decode * scale * decodes, {out[i]},
                            {"comm", fmt::format("decode b{}", k)}, 1);
    }
  }
  return out;
}

}  // namespace braid::sim::detail
