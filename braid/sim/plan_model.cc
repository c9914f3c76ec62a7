#include "braid/sim/plan_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/base/error.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/sim/collectives.h"

namespace braid::sim {

namespace {

using parallel::tensor_parallel::LayerRole;

// One pipeline stage's work, in the order its schedule runs it: a forward,
// a backward (its input-gradient part B where the schedule splits it), or
// the weight-gradient part W, of one micro-batch on one chunk of the rank.
struct StageOp {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;
  bool weight = false;
};

std::vector<StageOp> stage_order(const std::string& schedule, int stage, int stages, int microbatches, int chunks) {
  std::vector<StageOp> ops;
  if (schedule == "interleaved" || schedule == "zero_bubble") {
    // The runtime's own tables (parallel/pipeline/schedule.h).
    using parallel::pipeline::Action;
    for (const Action& a : parallel::pipeline::actions(parallel::pipeline::parse_schedule(schedule), stages, stage,
                                                       microbatches, chunks)) {
      ops.push_back({a.kind == Action::forward, a.microbatch, a.chunk, a.kind == Action::weight});
    }
    return ops;
  }
  if (schedule == "gpipe") {
    for (int m = 0; m < microbatches; ++m) ops.push_back({true, m});
    for (int m = microbatches - 1; m >= 0; --m) ops.push_back({false, m});
    return ops;
  }
  // 1F1B: the warm-up forwards that fill the pipeline below this stage, then
  // one forward and one backward in turn, then the backwards left.
  const int warmup = std::min(stages - stage - 1, microbatches);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({true, f});
  while (f < microbatches) {
    ops.push_back({true, f++});
    ops.push_back({false, b++});
  }
  while (b < microbatches) ops.push_back({false, b++});
  return ops;
}

// Workers' streams: 0 trains, 1 communicates, this one loads data. (A
// server's streams 2 + w serve worker w; servers load nothing.)
constexpr int kLoaderStream = 2;

class Builder {
 public:
  Builder(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in)
      : sim_(sim), plan_(plan), in_(in), layers_(static_cast<int>(in.profile.layers.size())) {
    if (layers_ == 0) fail<ValueError>("braid sim: the step profile has no layers");
    stage_of_ = in.stage_of_layer.empty() ? std::vector<int>(static_cast<size_t>(layers_), 0) : in.stage_of_layer;
    if (static_cast<int>(stage_of_.size()) != layers_) {
      fail<ValueError>("braid sim: {} stage assignments for {} layers", stage_of_.size(), layers_);
    }
    // Stages here are virtual stages (chunk c of rank p is c P + p): P V of
    // them with interleaving, else P.
    const int virtual_stages = plan.pipeline * chunks();
    first_.assign(static_cast<size_t>(virtual_stages), layers_);
    last_.assign(static_cast<size_t>(virtual_stages), -1);
    for (int l = 0; l < layers_; ++l) {
      const int s = stage_of_[static_cast<size_t>(l)];
      if (s < 0 || s >= virtual_stages) fail<ValueError>("braid sim: layer {} on stage {} of {}", l, s, virtual_stages);
      first_[static_cast<size_t>(s)] = std::min(first_[static_cast<size_t>(s)], l);
      last_[static_cast<size_t>(s)] = std::max(last_[static_cast<size_t>(s)], l);
    }
    for (int s = 0; s < virtual_stages; ++s) {
      if (last_[static_cast<size_t>(s)] < 0) fail<ValueError>("braid sim: pipeline stage {} has no layer", s);
    }
    // What each rank's training thread last waited for (its last compute,
    // or a collective it blocks on): its next op starts after it.
    tail_.assign(static_cast<size_t>(plan.world), -1);
  }

  StepMarks run(int steps) {
    StepMarks marks;
    marks.offsets.assign(static_cast<size_t>(plan_.workers()), 0);
    if (plan_.strategy == "ps" && plan_.consistency != "bsp") {
      // Nothing holds asynchronous workers in step: their pushes collide at
      // the servers and push them apart until they no longer do. Played in
      // step they would collide every time, so worker w starts w/W of a
      // compute step late.
      for (int w = 1; w < plan_.workers(); ++w) {
        const double late = in_.profile.step(plan_.microbatches) * w / plan_.workers();
        marks.offsets[static_cast<size_t>(w)] = late;
        tail_[static_cast<size_t>(plan_.servers + w)] = sim_.delay(late, {}, {"join", "starts out of step"});
      }
    }
    for (step_ = 0; step_ < steps; ++step_) {
      // The loader's thread fills the next batch while the step runs, on the same cores.
      for (int r = plan_.servers; r < plan_.world && in_.load > 0; ++r) {
        sim_.compute(r, in_.load, after(tail_[static_cast<size_t>(r)]), {"data", fmt::format("load s{}", step_)},
                     kLoaderStream);
      }
      if (plan_.strategy == "ps") {
        marks.steps.push_back(ps_step());
      } else {
        marks.steps.push_back(mesh_step());
      }
    }
    return marks;
  }

 private:
  int rank(int d, int t, int p) const { return plan_.servers + (p * plan_.data + d) * plan_.tensor + t; }
  LayerRole role(int layer) const {
    return in_.tensor_roles.empty() ? LayerRole::replicated
                                    : static_cast<LayerRole>(in_.tensor_roles[static_cast<size_t>(layer)]);
  }
  // The share of a layer's work and weights one tensor rank holds.
  double share(int layer) const {
    return plan_.tensor > 1 && role(layer) != LayerRole::replicated ? 1.0 / plan_.tensor : 1.0;
  }
  const LayerProfile& layer(int l) const { return in_.profile.layers[static_cast<size_t>(l)]; }
  int chunks() const { return plan_.pipeline > 1 && plan_.schedule == "interleaved" ? plan_.virtual_stages : 1; }
  bool split() const { return plan_.pipeline > 1 && plan_.schedule == "zero_bubble"; }
  // The layers rank p of the pipeline holds, in order (its chunks' together).
  std::vector<int> layers_of(int p) const {
    std::vector<int> out;
    for (int l = 0; l < layers_; ++l) {
      if (stage_of_[static_cast<size_t>(l)] % plan_.pipeline == p) out.push_back(l);
    }
    return out;
  }
  // A split backward's input-gradient share of a layer's backward: half of a
  // layer with weights (of a linear layer's two products, dX = g W; dW = g^T X
  // is W's), all of one without.
  double input_share(int l) const {
    for (const GradientReady& g : in_.profile.gradients) {
      if (g.layer == l) return 0.5;
    }
    return 1.0;
  }
  // Whether full recompute reruns layer l: one of the first recompute_layers blocks.
  bool recomputed(int l) const {
    if (plan_.recompute != "full" || l < 1 || l > layers_ - 3) return false;
    return plan_.recompute_layers <= 0 || l <= plan_.recompute_layers;
  }
  // Without a pipeline, micro-batches are accumulated one forward and
  // backward at a time (parallel/step_schedule.h), whatever parallel.schedule says.
  const std::string& schedule() const {
    static const std::string accumulate = "1f1b";
    return plan_.pipeline > 1 ? plan_.schedule : accumulate;
  }
  double slow(int r) const {
    double f = sim_.cluster().slowdown_of(r);
    if (!in_.jitter.empty()) f *= in_.jitter.at(static_cast<size_t>(r)).at(static_cast<size_t>(step_));
    return f;
  }
  // parallel.algorithm, or what the communicator would choose.
  comm::Algorithm algorithm(const std::vector<int>& group, double bytes) const {
    return plan_.algorithm != comm::Algorithm::automatic ? plan_.algorithm
                                                         : choose_allreduce(sim_.cluster(), group, bytes);
  }
  std::vector<TaskId> after(TaskId t) const { return t >= 0 ? std::vector<TaskId>{t} : std::vector<TaskId>{}; }

  TaskId compute(int r, double seconds, std::vector<TaskId> deps, const char* category, std::string name) {
    const TaskId t = sim_.compute(r, seconds * slow(r), std::move(deps), {category, std::move(name)}, 0, plan_.threads);
    tail_[static_cast<size_t>(r)] = t;
    return t;
  }

  // An all-reduce among the tensor ranks of (d, p), each starting at ready[t].
  std::vector<TaskId> tensor_allreduce(int d, int p, double bytes, const std::vector<TaskId>& ready,
                                       const std::string& what) {
    CollectiveArgs a;
    for (int t = 0; t < plan_.tensor; ++t) a.group.push_back(rank(d, t, p));
    a.bytes = bytes;
    a.ready = ready;
    a.name = fmt::format("tp {} s{}", what, step_);
    return allreduce(sim_, a, algorithm(a.group, bytes));
  }

  // Forward (or backward) of one layer on every tensor rank of (d, p): the
  // compute, then the all-reduces rewrite.h puts there.
  // weight: a split backward's W part (compute only; the tensor-parallel
  // all-reduces go with B, which carries the activations' gradients).
  void layer_pass(int l, bool forward, int m, int d, int p, std::vector<TaskId>& prev, bool weight = false) {
    const LayerProfile& lp = layer(l);
    const double mine = share(l);
    for (int t = 0; t < plan_.tensor; ++t) {
      TaskId& at = prev[static_cast<size_t>(t)];
      const int r = rank(d, t, p);
      if (forward) {
        at = compute(r, lp.forward * mine, after(at), "forward", fmt::format("{} F{}", lp.name, m));
      } else if (weight) {
        at = compute(r, lp.backward * (1 - input_share(l)) * mine, after(at), "backward",
                     fmt::format("{} W{}", lp.name, m));
      } else {
        // Full recompute runs a block's forward again just before its backward
        // (a transformer's blocks: every layer but the embedding, the final
        // norm and the head); selective's reruns are not modelled.
        const double seconds = lp.backward * (split() ? input_share(l) : 1.0) + (recomputed(l) ? lp.forward : 0);
        at = compute(r, seconds * mine, after(at), "backward", fmt::format("{} B{}", lp.name, m));
      }
    }
    if (plan_.tensor == 1 || weight) return;
    const double out = static_cast<double>(lp.output_bytes);
    const double in = l > 0 ? static_cast<double>(layer(l - 1).output_bytes) : 0;
    const double rows = static_cast<double>(in_.profile.batch);
    std::vector<std::pair<double, const char*>> reduces;
    switch (role(l)) {
      case LayerRole::embedding:
        if (forward) reduces = {{out, "embedding"}};
        break;
      case LayerRole::block:
        reduces = {{out, forward ? "attention" : "attention grad"}, {out, forward ? "mlp" : "mlp grad"}};
        break;
      case LayerRole::row:
        if (forward) reduces = {{out, "row"}};
        break;
      case LayerRole::column:
        if (!forward && l > 0) reduces = {{in, "column grad"}};
        break;
      case LayerRole::head:
        // The vocabulary-parallel loss: row maxima, then sums and target logits.
        if (forward) reduces = {{4 * rows, "loss max"}, {8 * rows, "loss sums"}};
        if (!forward && l > 0) reduces = {{in, "head grad"}};
        break;
      default:
        break;
    }
    for (const auto& [bytes, what] : reduces) prev = tensor_allreduce(d, p, bytes, prev, what);
    for (int t = 0; t < plan_.tensor; ++t) tail_[static_cast<size_t>(rank(d, t, p))] = prev[static_cast<size_t>(t)];
  }

  // One step of the data x tensor x pipeline mesh.
  std::vector<TaskId> mesh_step() {
    const int P = plan_.pipeline, M = plan_.microbatches, D = plan_.data, T = plan_.tensor;
    const int VS = P * chunks(), last = VS - 1;
    // sent[v][m][d * T + t]: the transfer carrying micro-batch m's activation
    // out of virtual stage v (forward) or its gradient out of it (backward).
    auto grid = [&] {
      return std::vector<std::vector<std::vector<TaskId>>>(static_cast<size_t>(VS),
                                                           std::vector<std::vector<TaskId>>(static_cast<size_t>(M)));
    };
    auto fwd_sent = grid(), bwd_sent = grid();
    // The end of each layer's backward for the last micro-batch, per (d, t):
    // when its gradients are final.
    std::vector<std::vector<TaskId>> grads_done(static_cast<size_t>(layers_),
                                                std::vector<TaskId>(static_cast<size_t>(D * T), -1));
    std::vector<std::vector<StageOp>> order(static_cast<size_t>(P));
    for (int p = 0; p < P; ++p) order[static_cast<size_t>(p)] = stage_order(schedule(), p, P, M, chunks());
    std::vector<size_t> next(static_cast<size_t>(P), 0);
    std::vector<int> micro_done(static_cast<size_t>(P), 0);  // backwards done per stage
    // Emit the stages' work in an order every dependency exists in: a stage
    // goes on while what its next op needs from its neighbours is there.
    for (bool progress = true; progress;) {
      progress = false;
      for (int p = 0; p < P; ++p) {
        auto& ops = order[static_cast<size_t>(p)];
        while (next[static_cast<size_t>(p)] < ops.size()) {
          const StageOp op = ops[next[static_cast<size_t>(p)]];
          const int v = op.chunk * P + p;
          const auto& needed =
              op.weight    ? std::vector<TaskId>{0}
              : op.forward ? (v > 0 ? fwd_sent[static_cast<size_t>(v - 1)][static_cast<size_t>(op.microbatch)]
                                    : std::vector<TaskId>{0})
                           : (v < last ? bwd_sent[static_cast<size_t>(v + 1)][static_cast<size_t>(op.microbatch)]
                                       : std::vector<TaskId>{0});
          if (needed.empty()) break;
          stage_op(p, op, fwd_sent, bwd_sent, grads_done);
          ++next[static_cast<size_t>(p)];
          progress = true;
        }
      }
    }
    // Every schedule above can always proceed; a stage left behind is a bug here.
    for (int p = 0; p < P; ++p) BRAID_CHECK_EQ(next[static_cast<size_t>(p)], order[static_cast<size_t>(p)].size());
    std::vector<TaskId> ends(static_cast<size_t>(plan_.workers()), -1);
    for (int p = 0; p < P; ++p) {
      for (int t = 0; t < T; ++t) finish_stage(p, t, grads_done, ends);
    }
    return ends;
  }

  void stage_op(int p, const StageOp& op, std::vector<std::vector<std::vector<TaskId>>>& fwd_sent,
                std::vector<std::vector<std::vector<TaskId>>>& bwd_sent, std::vector<std::vector<TaskId>>& grads_done) {
    const int P = plan_.pipeline, T = plan_.tensor, m = op.microbatch;
    const int v = op.chunk * P + p, last = P * chunks() - 1;
    const int a = first_[static_cast<size_t>(v)], b = last_[static_cast<size_t>(v)];
    // The ranks of the virtual stages after and before this one.
    const int next_rank = (p + 1) % P, prev_rank = (p + P - 1) % P;
    // The stage's gradients are final after its last backward (or W).
    const bool finishing = (op.weight || (!op.forward && !split())) &&
                           m == (schedule() == "gpipe" ? 0 : plan_.microbatches - 1);
    // Layer by layer over every replica at once: an MoE layer's all-to-all
    // under expert parallelism joins the data ranks of an expert group.
    std::vector<std::vector<TaskId>> prevs(static_cast<size_t>(plan_.data), std::vector<TaskId>(static_cast<size_t>(T)));
    for (int d = 0; d < plan_.data; ++d) {
      for (int t = 0; t < T; ++t) {
        // After what the rank's training thread last waited for: its previous
        // op's compute or collective (the previous step's, and anything that
        // ended it, such as local SGD's averaging, for the step's first op).
        std::vector<TaskId> deps;
        if (tail_[static_cast<size_t>(rank(d, t, p))] >= 0) deps.push_back(tail_[static_cast<size_t>(rank(d, t, p))]);
        if (!op.weight && op.forward && v > 0)
          deps.push_back(fwd_sent[static_cast<size_t>(v - 1)][static_cast<size_t>(m)][static_cast<size_t>(d * T + t)]);
        if (!op.weight && !op.forward && v < last) {
          deps.push_back(bwd_sent[static_cast<size_t>(v + 1)][static_cast<size_t>(m)][static_cast<size_t>(d * T + t)]);
        }
        prevs[static_cast<size_t>(d)][static_cast<size_t>(t)] = deps.empty() ? -1 : sim_.join(deps);
      }
    }
    auto pass = [&](int l, bool forward, bool weight) {
      if (exchanged(l) && !weight) {
        moe_pass(l, forward, m, p, prevs);
      } else {
        for (int d = 0; d < plan_.data; ++d) layer_pass(l, forward, m, d, p, prevs[static_cast<size_t>(d)], weight);
      }
      if (forward || !finishing) return;
      for (int d = 0; d < plan_.data; ++d) {
        for (int t = 0; t < T; ++t)
          grads_done[static_cast<size_t>(l)][static_cast<size_t>(d * T + t)] =
              prevs[static_cast<size_t>(d)][static_cast<size_t>(t)];
      }
    };
    if (op.weight) {
      for (int l = b; l >= a; --l) pass(l, false, /*weight=*/true);
    } else if (op.forward) {
      for (int l = a; l <= b; ++l) pass(l, true, false);
      for (int d = 0; d < plan_.data && v < last; ++d) {
        auto& out = fwd_sent[static_cast<size_t>(v)][static_cast<size_t>(m)];
        for (int t = 0; t < T; ++t) {
          out.push_back(sim_.transfer(rank(d, t, p), rank(d, t, next_rank), static_cast<double>(layer(b).output_bytes),
                                      after(prevs[static_cast<size_t>(d)][static_cast<size_t>(t)]),
                                      {"net", fmt::format("activation m{}", m)}, /*awaited=*/true));
        }
      }
    } else {
      for (int l = b; l >= a; --l) pass(l, false, false);
      for (int d = 0; d < plan_.data && v > 0; ++d) {
        auto& out = bwd_sent[static_cast<size_t>(v)][static_cast<size_t>(m)];
        for (int t = 0; t < T; ++t) {
          out.push_back(sim_.transfer(rank(d, t, p), rank(d, t, prev_rank),
                                      static_cast<double>(layer(a - 1).output_bytes),
                                      after(prevs[static_cast<size_t>(d)][static_cast<size_t>(t)]),
                                      {"net", fmt::format("gradient m{}", m)}, /*awaited=*/true));
        }
      }
    }
  }

  // Whether layer l is an MoE layer whose experts are shared out over expert groups.
  bool exchanged(int l) const { return plan_.expert > 1 && layer(l).experts > 0; }

  // The all-to-all of each expert group of every tensor rank (docs/moe.md:
  // groups of X neighbouring data ranks), each rank sending `bytes` in all
  // (its own block included), after prevs; prevs and tails become its end.
  void expert_alltoall(int p, double bytes, const std::string& what, std::vector<std::vector<TaskId>>& prevs) {
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
  void moe_pass(int l, bool forward, int m, int p, std::vector<std::vector<TaskId>>& prevs) {
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

  // After stage p's last backward on tensor rank t of every replica: the
  // data axis's gradient all-reduce in buckets, then the update.
  void finish_stage(int p, int t, const std::vector<std::vector<TaskId>>& grads_done, std::vector<TaskId>& ends) {
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

  // Expert-data parallelism: each rank's E / X experts' gradients averaged
  // over their replicas (the data / X ranks at the same place in their expert
  // groups), after the non-expert buckets, from when the earliest MoE layer's
  // backward is done. None with one expert group.
  std::vector<TaskId> expert_allreduce(int p, int t, const std::vector<int>& mine,
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

  // One bucket's average on the data axis, through the codec if there is one.
  std::vector<TaskId> bucket_allreduce(CollectiveArgs args, std::vector<TaskId> ready, double bytes, size_t k) {
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

  // One step of a worker under parameter servers: forward and backward, the
  // gradient pushed to every server in shards, the servers' update (bsp: once
  // every worker of the clock has pushed; otherwise per push), the shards
  // pulled back. Passes over the whole model cost gamma per byte each, as
  // parallel/parameter_server.cc and the server make them: the worker adds
  // the gradients into its push buffer and zeroes the next one, the server
  // copies a shard into each pull's reply, the worker copies the pulled
  // weights into the parameters.
  std::vector<TaskId> ps_step() {
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

  Simulator& sim_;
  const PlanSpec& plan_;
  const StepModelInputs& in_;
  const int layers_;
  std::vector<int> stage_of_, first_, last_;
  std::vector<TaskId> tail_;
  int step_ = 0;
};

}  // namespace

StepMarks add_steps(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in, int steps) {
  if (sim.cluster().ranks != plan.world) {
    fail<ValueError>("braid sim: a plan of {} ranks on a cluster of {}", plan.world, sim.cluster().ranks);
  }
  return Builder(sim, plan, in).run(steps);
}

}  // namespace braid::sim
