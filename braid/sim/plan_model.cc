#include "braid/sim/plan_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/base/error.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/sim/plan_builder.h"

namespace braid::sim::detail {

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

Builder::Builder(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in)
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

StepMarks Builder::run(int steps) {
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

// An all-reduce among the tensor ranks of (d, p), each starting at ready[t].
std::vector<TaskId> Builder::tensor_allreduce(int d, int p, double bytes, const std::vector<TaskId>& ready,
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
void Builder::layer_pass(int l, bool forward, int m, int d, int p, std::vector<TaskId>& prev, bool weight) {
  const LayerProfile& lp = layer(l);
  const double mine = compute_share(l);
  if (plan_.tensor > 1 && !weight) {
    const double seconds =
        forward ? lp.forward : lp.backward * (split() ? input_share(l) : 1.0) + (recomputed(l) ? lp.forward : 0);
    const std::vector<TpPart> parts = tensor_parts(l, forward, seconds);
    if (!parts.empty()) {
      run_parts(l, forward, m, d, p, parts, prev);
      return;
    }
  }
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
std::vector<TaskId> Builder::mesh_step() {
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

void Builder::stage_op(int p, const StageOp& op, std::vector<std::vector<std::vector<TaskId>>>& fwd_sent,
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

}  // namespace braid::sim::detail

namespace braid::sim {

StepMarks add_steps(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in, int steps) {
  if (sim.cluster().ranks != plan.world) {
    fail<ValueError>("braid sim: a plan of {} ranks on a cluster of {}", plan.world, sim.cluster().ranks);
  }
  return detail::Builder(sim, plan, in).run(steps);
}

}  // namespace braid::sim
