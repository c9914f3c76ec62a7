// The builder behind add_steps (plan_model.h): one per call, turning a
// plan's steps into simulator tasks. Its methods live by idea in
// plan_model.cc (the mesh's step: pipeline schedules, layers, activations
// between stages, tensor-parallel all-reduces), plan_model_sync.cc (the data
// axis's gradient sync, codecs, the update, local SGD's averaging),
// plan_model_expert.cc (expert parallelism's all-to-alls and expert-data
// all-reduce) and plan_model_ps.cc (parameter servers). Internal to braid/sim.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/sim/collectives.h"
#include "braid/sim/plan_model.h"

namespace braid::sim::detail {

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
std::vector<StageOp> stage_order(const std::string& schedule, int stage, int stages, int microbatches, int chunks);

// Workers' streams: 0 trains, 1 communicates, this one loads data. (A
// server's streams 2 + w serve worker w; servers load nothing.)
constexpr int kLoaderStream = 2;

class Builder {
 public:
  Builder(Simulator& sim, const PlanSpec& plan, const StepModelInputs& in);
  StepMarks run(int steps);

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
  // Its share of the compute: under sequence parallelism every layer's (the
  // replicated ones, the norms, run on the rank's segment; their weights and
  // update stay whole).
  double compute_share(int layer) const {
    return plan_.tensor > 1 && plan_.sequence_parallel ? 1.0 / plan_.tensor : share(layer);
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
  // Whether layer l is an MoE layer whose experts are shared out over expert groups.
  bool exchanged(int l) const { return plan_.expert > 1 && layer(l).experts > 0; }

  // An all-reduce among the tensor ranks of (d, p), each starting at ready[t].
  std::vector<TaskId> tensor_allreduce(int d, int p, double bytes, const std::vector<TaskId>& ready,
                                       const std::string& what);
  // Forward (or backward) of one layer on every tensor rank of (d, p): the
  // compute, then the all-reduces rewrite.h puts there.
  // weight: a split backward's W part (compute only; the tensor-parallel
  // all-reduces go with B, which carries the activations' gradients).
  void layer_pass(int l, bool forward, int m, int d, int p, std::vector<TaskId>& prev, bool weight = false);
  // Tensor parallelism's collectives placed by part (plan_model_tensor.cc).
  // A layer's pass on one tensor rank is a list of parts, each some compute
  // with at most one collective among the tensor ranks before it (an
  // all-gather feeding a column GEMM) or after it (a row GEMM's
  // reduce-scatter or all-reduce); under parallel.tp_overlap the collective
  // and the compute are cut into kOverlapChunks chunks and pipelined (chunk
  // j's collective on the communication thread beside chunk j + 1's product).
  enum class TpCollective { none, allreduce, allgather, reduce_scatter };
  struct TpPart {
    double compute = 0;  // seconds on each tensor rank
    TpCollective collective = TpCollective::none;
    double bytes = 0;     // the collective's whole vector
    bool before = false;  // the collective feeds the compute
    const char* what = "";
  };
  // tensor_parallel/overlap.h cuts each product into 4 chunks along the tokens.
  static constexpr int kOverlapChunks = 4;
  // The parts of layer l's pass when tensor parallelism changes more than
  // its share (a block, and under sequence parallelism the embedding and the
  // head); empty otherwise. seconds: the layer's whole compute of the pass
  // (a recomputed block's rerun included).
  std::vector<TpPart> tensor_parts(int l, bool forward, double seconds) const;
  void run_parts(int l, bool forward, int m, int d, int p, const std::vector<TpPart>& parts, std::vector<TaskId>& prev);
  std::vector<TaskId> tensor_collective(TpCollective kind, int d, int p, double bytes, const std::vector<TaskId>& ready,
                                        const std::string& what);
  // One step of the data x tensor x pipeline mesh.
  std::vector<TaskId> mesh_step();
  void stage_op(int p, const StageOp& op, std::vector<std::vector<std::vector<TaskId>>>& fwd_sent,
                std::vector<std::vector<std::vector<TaskId>>>& bwd_sent, std::vector<std::vector<TaskId>>& grads_done);
  // The all-to-all of each expert group of every tensor rank (docs/moe.md:
  // groups of X neighbouring data ranks), each rank sending `bytes` in all
  // (its own block included), after prevs; prevs and tails become its end.
  void expert_alltoall(int p, double bytes, const std::string& what, std::vector<std::vector<TaskId>>& prevs);
  // An MoE layer under expert parallelism, on every rank of stage p. Forward:
  // the attention and router, the counts' all-to-all (E int64), the rows'
  // dispatch, the local experts over the rows routed to them (under balanced
  // routing as many as the rank routed: N top_k, whatever X), the outputs'
  // combine. Backward: the same exchanges in reverse, the experts' backward
  // between them. The MoE MLP is whole on every tensor rank; the rest of the
  // block is the tensor-parallel share.
  void moe_pass(int l, bool forward, int m, int p, std::vector<std::vector<TaskId>>& prevs);
  // After stage p's last backward on tensor rank t of every replica: the
  // data axis's gradient all-reduce in buckets, then the update.
  void finish_stage(int p, int t, const std::vector<std::vector<TaskId>>& grads_done, std::vector<TaskId>& ends);
  // Expert-data parallelism: each rank's E / X experts' gradients averaged
  // over their replicas (the data / X ranks at the same place in their expert
  // groups), after the non-expert buckets, from when the earliest MoE layer's
  // backward is done. None with one expert group.
  std::vector<TaskId> expert_allreduce(int p, int t, const std::vector<int>& mine,
                                       const std::vector<std::vector<TaskId>>& grads_done, std::vector<TaskId> done);
  // One bucket's average on the data axis, through the codec if there is one.
  std::vector<TaskId> bucket_allreduce(CollectiveArgs args, std::vector<TaskId> ready, double bytes, size_t k);
  // One step of a worker under parameter servers: forward and backward, the
  // gradient pushed to every server in shards, the servers' update (bsp: once
  // every worker of the clock has pushed; otherwise per push), the shards
  // pulled back. Passes over the whole model cost gamma per byte each, as
  // parallel/parameter_server.cc and the server make them: the worker adds
  // the gradients into its push buffer and zeroes the next one, the server
  // copies a shard into each pull's reply, the worker copies the pulled
  // weights into the parameters.
  std::vector<TaskId> ps_step();

  Simulator& sim_;
  const PlanSpec& plan_;
  const StepModelInputs& in_;
  const int layers_;
  std::vector<int> stage_of_, first_, last_;
  std::vector<TaskId> tail_;
  int step_ = 0;
};

}  // namespace braid::sim::detail
