#include "braid/parallel/plan_factory.h"

#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/stage.h"
#include "braid/parallel/sync_batch_norm.h"
#include "braid/parallel/tensor_parallel/rewrite.h"

namespace braid::parallel {

std::vector<std::string> strategy_names() {
  return {"auto", "none", "allreduce", "zero", "ps", "skeleton", "gossip", "hybrid"};
}

namespace {

void check_strategy(const std::string& name) {
  for (const std::string& n : strategy_names()) {
    if (n == name) return;
  }
  fail<ConfigError>("unknown parallel.strategy '{}' (known: {})", name, strategy_names());
}

// This rank's pipeline stage of `model`, cut the same way on every rank
// (measured costs differ between ranks, so rank 0's cut is broadcast).
std::shared_ptr<nn::Module> cut_pipeline(const PlanOptions& o, const Mesh& mesh, std::shared_ptr<nn::Module> model) {
  const int stages = mesh.degree(Axis::pipeline);
  auto seq = std::dynamic_pointer_cast<nn::Sequential>(model);
  if (!seq) fail<ConfigError>("parallel.pipeline = {} needs a model built as an nn::Sequential", stages);
  const int layers = static_cast<int>(seq->size());
  std::vector<int> starts;
  if (!o.stage_boundaries.empty()) {
    starts = pipeline::starts_from_boundaries(o.stage_boundaries, layers, stages);
  } else if (o.balance == "params") {
    starts = pipeline::balanced_starts(pipeline::parameter_costs(*seq), stages);
  } else if (o.balance == "time") {
    if (!o.sample_input.defined()) fail<ConfigError>("parallel.balance = time needs sample inputs to time layers on");
    std::vector<int64_t> cut(static_cast<size_t>(stages), 0);
    if (mesh.rank() == 0) {
      const auto s = pipeline::balanced_starts(pipeline::measured_costs(*seq, o.sample_input), stages);
      std::copy(s.begin(), s.end(), cut.begin());
    }
    const Duration timeout = mesh.world().options().timeout;
    comm::Communicator(mesh.world()).broadcast(cut, {.root = 0, .timeout = timeout}).wait(Deadline::after(timeout * 2));
    starts.assign(cut.begin(), cut.end());
  } else {
    fail<ConfigError>("parallel.balance = {} (known: params, time)", o.balance);
  }
  return pipeline::cut_stage(*seq, starts, mesh.coord(Axis::pipeline));
}

}  // namespace

PlannedModel make_plan(const PlanOptions& o, const comm::Communicator& world,
                       std::shared_ptr<comm::Transport> transport, std::shared_ptr<nn::Module> model,
                       nn::LossFn loss) {
  check_strategy(o.strategy);
  PlannedModel out{.model = std::move(model), .loss = std::move(loss), .plan = nullptr};
  PlanParts parts;
  if (o.strategy == "ps") {
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm reduces statistics over the data axis inside forward; "
                        "parallel.strategy = ps has no such axis (use allreduce or zero)");
    }
    if (o.mesh.tensor > 1 || o.mesh.pipeline > 1) {
      fail<ConfigError>("parallel.strategy = ps trains whole replicas: parallel.tensor and parallel.pipeline must "
                        "be 1 (got {} and {})", o.mesh.tensor, o.mesh.pipeline);
    }
    if (!transport) fail<ConfigError>("parallel.strategy = ps needs the job's transport");
    parts.aggregation = std::make_unique<ParameterServer>(std::move(transport), o.ps);
    parts.schedule = std::make_unique<LocalSchedule>(o.microbatches, o.microbatch_max);
    out.plan = std::make_unique<Plan>(std::move(parts));
    return out;
  }
  if (o.strategy == "skeleton") {
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm makes every replica normalise with the whole batch inside forward; "
                        "parallel.strategy = skeleton trains replicas apart between merges (use local batch norm)");
    }
    // Tensor-parallel ranks hold replicated parameters (biases, norms) that
    // must stay equal across the tensor axis, but each shard's skeleton is
    // the top fraction of its own entries, so they would drift apart.
    if (o.mesh.tensor > 1) {
      fail<ConfigError>("parallel.strategy = skeleton combines whole replicas or pipeline stages: parallel.tensor "
                        "must be 1 (got {})", o.mesh.tensor);
    }
    if (!world.valid()) fail<ConfigError>("parallel.strategy = skeleton needs a job's communicator");
  }
  if (o.strategy == "gossip" || o.strategy == "hybrid") {
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm all-reduces statistics over the data axis inside forward; "
                        "parallel.strategy = {} never waits for the whole axis (use local batch norm)", o.strategy);
    }
    // Tensor-parallel ranks hold replicated parameters (biases, norms) that
    // must stay equal across the tensor axis; each tensor rank would mix (or
    // take late gradients) on its own, and they would drift apart.
    if (o.mesh.tensor > 1) {
      fail<ConfigError>("parallel.strategy = {} combines whole replicas or pipeline stages: parallel.tensor must be "
                        "1 (got {})", o.strategy, o.mesh.tensor);
    }
    if (!world.valid()) fail<ConfigError>("parallel.strategy = {} needs a job's communicator", o.strategy);
  }
  if (world.valid()) parts.mesh = Mesh::build(world, o.mesh);
  // Tensor parallelism rewrites the whole model first (its head is the whole
  // model's last layer), then the pipeline keeps this rank's stage of it.
  if (parts.mesh.degree(Axis::tensor) > 1) {
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(out.model);
    if (!seq) fail<ConfigError>("parallel.tensor = {} needs a model built as an nn::Sequential", o.mesh.tensor);
    tensor_parallel::Sharded sharded =
        tensor_parallel::shard_tensor_parallel(*seq, parts.mesh.group(Axis::tensor), out.loss);
    out.loss = sharded.loss;
    parts.full_output = sharded.full_output;
    parts.shards = std::move(sharded.specs);
  }
  if (parts.mesh.degree(Axis::pipeline) > 1) {
    if (o.microbatch_max > 0) {
      fail<ConfigError>("parallel.microbatch_max caps the local schedule's micro-batches; a pipeline runs "
                        "parallel.microbatches = {} micro-batches of whatever size the batch gives", o.microbatches);
    }
    out.model = cut_pipeline(o, parts.mesh, out.model);
    ShardSpecs mine;  // the stage's parameters only
    for (const auto& [name, t] : out.model->named_parameters()) {
      if (auto it = parts.shards.find(name); it != parts.shards.end()) mine[name] = it->second;
    }
    parts.shards = std::move(mine);
    parts.schedule = std::make_unique<pipeline::Stage>(
        parts.mesh.group(Axis::pipeline),
        pipeline::StageOptions{.schedule = pipeline::parse_schedule(o.schedule), .microbatches = o.microbatches,
                               .recompute = o.recompute, .dropout_generator = o.dropout_generator,
                               .timeout = parts.mesh.world().options().timeout});
  } else {
    parts.schedule = std::make_unique<LocalSchedule>(o.microbatches, o.microbatch_max);
  }
  if (o.sync_batch_norm && world.valid()) synchronize_batch_norm(*out.model, parts.mesh.group(Axis::data));
  const bool sync = o.strategy == "allreduce" || (o.strategy == "auto" && parts.mesh.degree(Axis::data) > 1);
  if (o.strategy == "zero") {
    if (!world.valid()) fail<ConfigError>("parallel.strategy = zero needs a job's communicator");
    parts.grad_sync = std::make_unique<zero::ZeroSync>(parts.mesh.group(Axis::data), o.zero, out.model);
  } else if (o.strategy == "skeleton") {
    // Each pipeline stage's replicas combine among themselves: they hold the same shapes.
    parts.aggregation = std::make_unique<skeleton::SkeletonPartition>(parts.mesh.group(Axis::data), o.skeleton);
  } else if (o.strategy == "gossip") {
    // Each pipeline stage's replicas mix among themselves: they hold the same shapes.
    parts.aggregation = std::make_unique<gossip::Gossip>(parts.mesh.group(Axis::data), o.gossip);
  } else if (o.strategy == "hybrid") {
    // Each pipeline stage's data rank 0 coordinates that stage's replicas.
    parts.aggregation = std::make_unique<hybrid::TimeoutHybrid>(parts.mesh.group(Axis::data), o.hybrid);
  } else if (sync && world.valid()) {
    parts.grad_sync = std::make_unique<BucketedAllreduce>(parts.mesh.group(Axis::data), o.data_parallel);
  }
  out.plan = std::make_unique<Plan>(std::move(parts));
  return out;
}

}  // namespace braid::parallel
