// Plan: how one training step runs across the job (docs/design.md,
// "parallel"). A plan is a mesh plus small parts that compose:
//
//   schedule     owns forward and backward of the step (local with
//                micro-batches; a pipeline stage's GPipe or 1F1B)
//   sharding     what this rank holds of the model (tensor-parallel shards,
//                a pipeline stage): applied to the model before the plan is
//                built; the plan keeps its shard specs (checkpoints, norms)
//   context      the sequence split over the context axis: each rank runs
//                its tokens, attention through the ring or Ulysses
//   grad sync    combines gradients over the data axis (bucketed all-reduce),
//                and the context axis with it
//   aggregation  combines replicas around the optimizer step (parameter
//                server, skeleton partition)
//
// The trainer calls, per step: forward_backward, finish_gradients, clip_grad_norm,
// then step (when the plan owns the optimizer) or the local optimizer, then
// after_step. Every part may be absent; a default Plan is one process.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/context_parallel/context_parallel.h"
#include "braid/parallel/grad_sync.h"
#include "braid/parallel/mesh.h"
#include "braid/parallel/shard_spec.h"
#include "braid/parallel/step_schedule.h"

namespace braid::parallel {

struct PlanParts {
  Mesh mesh = Mesh::single_process();
  std::unique_ptr<StepSchedule> schedule;     // null: LocalSchedule(1)
  std::unique_ptr<GradSync> grad_sync;        // null: none
  std::unique_ptr<Aggregation> aggregation;   // null: the local optimizer alone
  // Per parameter name: how this rank's tensor is a slice of the whole
  // (absent: the whole tensor, replicated along the tensor axis).
  ShardSpecs shards{};
  // The local output -> the whole output for evaluation (tensor-parallel
  // vocabulary shards gathered); null: identity.
  std::function<Tensor(const Tensor&)> full_output{};
  // The context axis (degree > 1): inputs and targets sharded by sequence,
  // attention replaced around forward and backward, outputs gathered for
  // evaluation; null: none.
  std::shared_ptr<context_parallel::ContextParallel> context{};
};

class Plan {
 public:
  Plan();  // one process
  explicit Plan(PlanParts parts);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const Mesh& mesh() const { return p_.mesh; }
  // "data 2 x tensor 1 x pipeline 1 ...; schedule local x1; grad sync allreduce; aggregation none"
  std::string describe() const;

  // What the optimizer must be built over: the model's parameters, or the
  // slices of them this rank updates under ZeRO.
  std::vector<Tensor> optimizer_parameters(const nn::Module& model) const;
  // The name of the parameter each of those is (a slice's whole parameter).
  std::vector<std::string> optimizer_parameter_names(const nn::Module& model) const;
  // The run of its parameter's elements each of those holds (GradSync::
  // optimizer_parameter_runs); empty when they are the whole parameters.
  std::vector<std::pair<int64_t, int64_t>> optimizer_parameter_runs() const {
    return p_.grad_sync ? p_.grad_sync->optimizer_parameter_runs() : std::vector<std::pair<int64_t, int64_t>>{};
  }
  // Before the first step, with the model this rank trains (after sharding)
  // and the optimizer built over optimizer_parameters() (ZeRO needs it: the
  // norms LARS and LAMB scale by are summed across slices; may be null
  // otherwise).
  void setup(nn::Module& model, const nlohmann::json& description, optim::Optimizer* optimizer = nullptr);
  // Forward and backward of the step; every gradient final and combined
  // afterwards except for finish_gradients(). Returns the batch's mean loss.
  // `last` false: one micro-batch of a step accumulated over several calls
  // (as DDP's no_sync): its backward only adds to the gradients, the data
  // axis communicates during the call with `last` true, and the
  // aggregation's before_forward runs once, on a step's first call.
  double forward_backward(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                          bool last = true);
  void finish_gradients();
  // Before forward_backward: true when this step's update is already decided
  // without this rank's gradient (Aggregation::step_decided); the caller then
  // skips forward_backward and calls finish_gradients() for the update.
  // Never on plans with a grad sync or a pipeline, whose steps are collective.
  bool step_decided();
  // The gradients this rank holds (the optimizer's slices under ZeRO, else
  // its parameters'); undefined where a parameter has none yet.
  std::vector<Tensor> gradients() const;
  // Sum of squares over the whole model of f32 tensors laid out like
  // gradients() (each element counted once across shards): collective over
  // the tensor and pipeline axes, and over the data axis under ZeRO.
  double sum_squares(const std::vector<Tensor>& like_gradients) const;
  // Global L2 norm of the whole model's gradient across shards (each
  // parameter counted once), and the clip by it (optim/clip.h's rule).
  double grad_norm() const;
  double clip_grad_norm(double max_norm) const;
  bool owns_optimizer() const { return p_.aggregation && p_.aggregation->owns_optimizer(); }
  void step(double lr);
  void after_step();
  // The aggregation's count of steps over every replica (Aggregation::job_steps).
  std::optional<int64_t> job_steps() const {
    return p_.aggregation ? p_.aggregation->job_steps() : std::nullopt;
  }
  void finish();

  // Evaluation: the whole output on ranks that end the model, else undefined.
  Tensor evaluate(nn::Module& model, const Tensor& input);
  // Around a pass of evaluate() calls: the aggregation's job model swapped
  // in and out (Aggregation::begin_evaluation).
  void begin_evaluation() {
    if (p_.aggregation) p_.aggregation->begin_evaluation();
  }
  void end_evaluation() {
    if (p_.aggregation) p_.aggregation->end_evaluation();
  }
  bool ends_model() const;
  // Values computed where the model ends, copied to every rank of the
  // pipeline (evaluation metrics); in place.
  void share_from_model_end(std::vector<double>& values) const;
  // True when the data axis's replicas hold the same model after every step
  // (a synchronous gradient sync and no aggregation: the same combined
  // gradient, the same optimizer, rank 0's buffers) and each may evaluate
  // its own share of a set on its own (ZeRO-3's forward is collective).
  // Then evaluation splits the set over the replicas and sums their counts
  // with sum_over_replicas: data_world() times less work per rank.
  bool evaluates_shares() const;
  // True when an evaluation involves other ranks (shares summed, a pipeline,
  // tensor-parallel layers, ZeRO-3's gathers): every rank must run it. False:
  // a rank evaluates on its own, and one whose figures nobody reads may skip it.
  bool evaluation_is_collective() const;
  // Every data replica's `values` summed, on every rank (collective over the
  // data axis); in place.
  void sum_over_replicas(std::vector<double>& values) const;

  // The replica this process trains and how many there are (its data shard).
  int data_rank() const;
  int data_world() const;
  // Writes the run's reports (world rank 0, the first worker under a
  // parameter server, member 0 of an ensemble).
  bool is_leader() const;
  // Writes checkpoints: replica 0 of every shard, or every member of an
  // ensemble (each its own model).
  bool writes_checkpoints() const;
  // "" for an unsharded model, else "t<tensor>-p<pipeline>" (the shard's
  // checkpoint sub-folder).
  std::string shard_name() const;
  const ShardSpecs& shards() const { return p_.shards; }
  // The schedule's figures of the last step (StepSchedule::stats).
  nlohmann::json step_stats() const { return p_.schedule->stats(); }
  // The aggregation's figures of the run (bytes exchanged), and as one line
  // for the user; empty when it keeps none.
  nlohmann::json aggregation_stats() const {
    return p_.aggregation ? p_.aggregation->stats() : nlohmann::json::object();
  }
  std::string report() const { return p_.aggregation ? p_.aggregation->report() : ""; }
  // A codec's figures since the last call (bytes before and after encoding,
  // encode and decode seconds); empty without one.
  nlohmann::json take_codec_stats() {
    if (p_.grad_sync) return p_.grad_sync->take_stats();
    return p_.aggregation ? p_.aggregation->take_stats() : nlohmann::json::object();
  }
  // Each data rank's state besides model and optimizer (GradSync::rank_state):
  // collective over the data axis; complete on data rank 0.
  nn::NamedTensors rank_state() { return p_.grad_sync ? p_.grad_sync->rank_state() : nn::NamedTensors{}; }
  void load_rank_state(const nn::NamedTensors& state) {
    if (p_.grad_sync) p_.grad_sync->load_rank_state(state);
  }
  // The replica aggregation, null when there is none (callers that need one
  // kind, e.g. an ensemble's end-of-training collectives, cast it).
  Aggregation* aggregation() const { return p_.aggregation.get(); }

  // The plan parts' own state (a parameter server's position).
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);
  // The whole model's and optimizer's state for a checkpoint, whatever the
  // data axis splits (GradSync::model_state) or leaves unmerged
  // (Aggregation::model_state): collective over the data axis; complete on
  // the ranks that write checkpoints.
  nn::NamedTensors model_state(const nn::Module& model);
  void load_model_state(nn::Module& model, const nn::NamedTensors& state);
  optim::OptimizerState optimizer_state(const optim::Optimizer& optimizer);
  void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state);
  // World rank 0's `values` on every rank that trains in step with it (the
  // whole job, unless an aggregation lets replicas run on their own: then
  // each keeps its own), in place. For decisions every rank must take alike
  // (a batch size) from figures that may differ in their last bits.
  void agree(std::vector<double>& values) const;
  // Every world rank's `value`, by world rank (an all-gather), under the same
  // condition as agree: ranks that train in step. Otherwise just {value}.
  std::vector<double> gather_world(double value) const;
  // This process's rank in the job (0 for a single process).
  int world_rank() const;
  // World rank 0's `id` (at most 32 bytes) on every rank of the job, so all
  // shards of a run label their checkpoints alike (an ensemble's members,
  // separate models, keep their own).
  std::string agree_on_run_id(const std::string& id) const;
  // "zero-2" style name of the data axis's gradient synchronisation, "" when none.
  std::string grad_sync_name() const { return p_.grad_sync ? p_.grad_sync->name() : ""; }

 private:
  PlanParts p_;
  // Makes the optimizer's whole-tensor figures (LARS's and LAMB's norms)
  // whole again where its parameters are slices: summed over the data axis
  // under ZeRO, over the tensor axis for tensor-parallel slices.
  void total_across_shards(optim::Optimizer& optimizer);
  // The gradients a step's norm is taken over: the optimizer's slices under
  // ZeRO, else the parameters.
  const std::vector<NamedParameter>& gradient_holders() const { return slices_.empty() ? params_ : slices_; }

  std::vector<NamedParameter> params_, slices_;
  bool finished_ = false;
  bool accumulating_ = false;  // the last forward_backward was not a step's last
};

}  // namespace braid::parallel
