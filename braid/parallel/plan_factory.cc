#include "braid/parallel/plan_factory.h"

#include "braid/parallel/codec_hook.h"
#include "braid/parallel/context_parallel/context_parallel.h"
#include "braid/parallel/hybrid/deadline_allreduce.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/stage.h"
#include "braid/parallel/sync_batch_norm.h"
#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/parallel/expert_parallel/expert_parallel.h"

namespace braid::parallel {

std::vector<std::string> strategy_names() {
  return {"auto", "none", "allreduce", "zero", "ps", "skeleton", "local_sgd", "bmuf", "easgd", "admm", "gossip",
          "hybrid", "ensemble"};
}

namespace {

// Aggregations over the data axis of a mesh that do not synchronise the
// whole axis at every step (so refuse synchronised batch norm).
bool combines_on_data_axis(const std::string& s) {
  return s == "skeleton" || s == "local_sgd" || s == "bmuf" || s == "easgd" || s == "admm" || s == "gossip" ||
         s == "hybrid";
}

// Asynchronous EASGD and ADMM keep their center on parameter servers.
bool on_servers(const PlanOptions& o) {
  return (o.strategy == "easgd" && o.easgd.async) || (o.strategy == "admm" && o.admm.async);
}

void check_strategy(const std::string& name) {
  for (const std::string& n : strategy_names()) {
    if (n == name) return;
  }
  fail<ConfigError>("unknown parallel.strategy '{}' (known: {})", name, strategy_names());
}

// This rank's pipeline stage of `model`, cut the same way on every rank
// (measured costs differ between ranks, so rank 0's cut is broadcast); with
// virtual stages, the cut is into P V of them and the rank holds V chunks.
pipeline::RankChunks cut_pipeline(const PlanOptions& o, const Mesh& mesh, std::shared_ptr<nn::Module> model) {
  const int ranks = mesh.degree(Axis::pipeline), chunks = o.virtual_stages;
  const int stages = ranks * chunks;
  auto seq = std::dynamic_pointer_cast<nn::Sequential>(model);
  if (!seq) fail<ConfigError>("parallel.pipeline = {} needs a model built as an nn::Sequential", ranks);
  const int layers = static_cast<int>(seq->size());
  std::vector<int> starts;
  if (chunks > 1 && layers < stages) {
    fail<ConfigError>("parallel.virtual_stages = {} x parallel.pipeline = {} needs {} chunks of at least one layer; "
                      "the model has {} layers ({} per rank)",
                      chunks, ranks, stages, layers, layers / ranks);
  }
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
  return pipeline::cut_chunks(*seq, starts, ranks, mesh.coord(Axis::pipeline));
}

}  // namespace

PlannedModel make_plan(const PlanOptions& o, const comm::Communicator& world,
                       std::shared_ptr<comm::Transport> transport, std::shared_ptr<nn::Module> model,
                       nn::LossFn loss) {
  check_strategy(o.strategy);
  // The context axis averages gradients over data x context: a synchronous
  // gradient sync on every step.
  if (o.mesh.context > 1 && o.strategy != "auto" && o.strategy != "allreduce" && o.strategy != "zero") {
    fail<ConfigError>("parallel.context = {} averages gradients over the data and context axes every step: "
                      "parallel.strategy must be auto, allreduce or zero (got {})", o.mesh.context, o.strategy);
  }
  if (o.codec.name != "none" && o.strategy != "allreduce" && o.strategy != "auto" && o.strategy != "ps") {
    fail<ConfigError>("parallel.codec = {} compresses the gradients of parallel.strategy = allreduce or ps, not {}",
                      o.codec.name, o.strategy);
  }
  o.codec.validate();
  if (o.expert > 1 && o.strategy != "allreduce" && o.strategy != "auto" && o.strategy != "zero") {
    fail<ConfigError>("parallel.expert = {} splits the data axis of parallel.strategy = allreduce, auto or zero, not "
                      "{} (the averaging strategies do not shard experts)", o.expert, o.strategy);
  }
  if (o.expert > 1 && o.strategy == "zero" && o.zero.stage == 3) {
    fail<ConfigError>("parallel.expert = {} with parallel.zero_stage = 3: stage 3 gathers whole layers over the data "
                      "axis, and an MoE layer's experts live on their replicas only (use zero_stage 1 or 2)", o.expert);
  }
  if (o.expert > 1 && o.mesh.context > 1) {
    fail<ConfigError>("parallel.expert = {} with parallel.context = {}: context parallelism's ranks would each "
                      "route their share of a sequence through one expert group (use parallel.context = 1)",
                      o.expert, o.mesh.context);
  }
  PlannedModel out{.model = std::move(model), .loss = std::move(loss), .plan = nullptr};
  PlanParts parts;
  // Recompute is set on the whole model once every rewrite has swapped its
  // layers, so recompute_layers counts the whole model's blocks on every stage.
  auto recompute = [&] {
    if (o.recompute.mode == nn::Recompute::none) return;
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(out.model);
    if (!seq) {
      fail<ConfigError>("parallel.recompute = {} needs a model built as an nn::Sequential", nn::name(o.recompute.mode));
    }
    nn::apply_recompute(*seq, o.recompute);
  };
  // Whole replicas on one rank each, with no mesh among them.
  auto whole_replicas = [&](std::unique_ptr<Aggregation> aggregation) {
    recompute();
    parts.aggregation = std::move(aggregation);
    parts.schedule = std::make_unique<LocalSchedule>(o.microbatches, o.microbatch_max);
    out.plan = std::make_unique<Plan>(std::move(parts));
    return std::move(out);
  };
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
    ParameterServerOptions ps = o.ps;
    ps.config.codec = o.codec;  // the servers learn it at hello
    return whole_replicas(std::make_unique<ParameterServer>(std::move(transport), ps));
  }
  if (on_servers(o)) {
    // The workers are whole replicas talking to servers only: no mesh among them.
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm reduces statistics over the data axis inside forward; "
                        "asynchronous {} has workers that never wait for each other", o.strategy);
    }
    if (o.mesh.tensor > 1 || o.mesh.pipeline > 1) {
      fail<ConfigError>("asynchronous {} trains whole replicas against parameter servers: parallel.tensor and "
                        "parallel.pipeline must be 1 (got {} and {})", o.strategy, o.mesh.tensor, o.mesh.pipeline);
    }
    if (!transport || o.servers < 1) {
      fail<ConfigError>("{}.mode = async keeps its center on parameter servers: start the job with "
                        "braid launch --servers S --workers W -- braid train ...", o.strategy);
    }
    if (o.strategy == "easgd") {
      return whole_replicas(std::make_unique<averaging::Easgd>(std::move(transport), o.servers, o.easgd));
    }
    return whole_replicas(std::make_unique<averaging::Admm>(std::move(transport), o.servers, o.admm));
  }
  if (o.strategy == "ensemble") {
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm reduces statistics over the replicas inside forward; the members of "
                        "parallel.strategy = ensemble never communicate while they train (use local batch norm)");
    }
    // Members are whole models on one rank each; a member made of several
    // ranks (data, tensor or pipeline parallel) would need a mesh per member.
    if (o.mesh.tensor > 1 || o.mesh.pipeline > 1 || (o.mesh.data != 0 && o.mesh.data != world.size())) {
      fail<ConfigError>("parallel.strategy = ensemble trains one whole model per rank: parallel.tensor and "
                        "parallel.pipeline must be 1 and parallel.data 0 or the world size (got {}, {} and {})",
                        o.mesh.tensor, o.mesh.pipeline, o.mesh.data);
    }
    // No mesh: building one splits the world, and members talk only after training.
    return whole_replicas(std::make_unique<Ensemble>(world, o.ensemble));
  }
  if (combines_on_data_axis(o.strategy)) {
    if (o.sync_batch_norm) {
      fail<ConfigError>("synchronised batch norm reduces statistics over the whole data axis inside every forward; "
                        "parallel.strategy = {} does not synchronise the data axis every step (use local batch norm)",
                        o.strategy);
    }
    // Tensor-parallel ranks hold replicated parameters (biases, norms) that
    // must stay equal across the tensor axis. The skeleton picks each shard's
    // top entries alone, gossip mixes and hybrid takes late gradients on each
    // tensor rank alone, so they would drift apart; the averaging rules treat
    // every entry alike and keep them equal.
    const bool per_shard = o.strategy == "skeleton" || o.strategy == "gossip" || o.strategy == "hybrid";
    if (per_shard && o.mesh.tensor > 1) {
      fail<ConfigError>("parallel.strategy = {} combines whole replicas or pipeline stages: parallel.tensor must be "
                        "1 (got {})", o.strategy, o.mesh.tensor);
    }
    if (!world.valid()) fail<ConfigError>("parallel.strategy = {} needs a job's communicator", o.strategy);
  }
  if (world.valid()) parts.mesh = Mesh::build(world, o.mesh);
  if (parts.mesh.degree(Axis::context) > 1) {
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(out.model);
    if (!seq) fail<ConfigError>("parallel.context = {} needs a model built as an nn::Sequential", o.mesh.context);
    if (o.mesh.pipeline > 1 && o.stage_boundaries.empty() && o.balance == "time") {
      fail<ConfigError>("parallel.balance = time times the layers on whole sequences; with parallel.context = {} set "
                        "parallel.stage_boundaries or parallel.balance = params", o.mesh.context);
    }
    parts.context = std::make_shared<context_parallel::ContextParallel>(parts.mesh.group(Axis::context),
                                                                        context_parallel::parse_mode(o.context_mode));
    context_parallel::check_model(*seq, *parts.context, parts.mesh.degree(Axis::tensor));
  }
  // Tensor parallelism rewrites the whole model first (its head is the whole
  // model's last layer), then the pipeline keeps this rank's stage of it.
  if (parts.mesh.degree(Axis::tensor) > 1) {
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(out.model);
    if (!seq) fail<ConfigError>("parallel.tensor = {} needs a model built as an nn::Sequential", o.mesh.tensor);
    tensor_parallel::Sharded sharded =
        tensor_parallel::shard_tensor_parallel(*seq, parts.mesh.group(Axis::tensor), out.loss,
                                               {.sequence_parallel = o.sequence_parallel, .overlap = o.tp_overlap});
    out.loss = sharded.loss;
    parts.full_output = sharded.full_output;
    parts.shards = std::move(sharded.specs);
  }
  recompute();
  if (parts.mesh.degree(Axis::pipeline) > 1) {
    if (o.microbatch_max > 0) {
      fail<ConfigError>("parallel.microbatch_max caps the local schedule's micro-batches; a pipeline runs "
                        "parallel.microbatches = {} micro-batches of whatever size the batch gives", o.microbatches);
    }
    const pipeline::Schedule schedule = pipeline::parse_schedule(o.schedule);
    pipeline::check_schedule(schedule, parts.mesh.degree(Axis::pipeline), o.virtual_stages, o.microbatches);
    if ((schedule == pipeline::Schedule::zero_bubble || schedule == pipeline::Schedule::interleaved) &&
        o.strategy == "zero" && o.zero.stage == 3) {
      fail<ConfigError>("parallel.schedule = {} with parallel.strategy = zero and zero.stage = 3: stage 3 gathers a "
                        "layer's parameters around whole-model forwards and backwards (use zero.stage 1 or 2)",
                        o.schedule);
    }
    pipeline::RankChunks mine_chunks = cut_pipeline(o, parts.mesh, out.model);
    out.model = mine_chunks.model;
    ShardSpecs mine;  // the stage's parameters only
    for (const auto& [name, t] : out.model->named_parameters()) {
      if (auto it = parts.shards.find(name); it != parts.shards.end()) mine[name] = it->second;
    }
    parts.shards = std::move(mine);
    parts.schedule = std::make_unique<pipeline::Stage>(
        parts.mesh.group(Axis::pipeline),
        pipeline::StageOptions{.schedule = schedule, .microbatches = o.microbatches,
                               .chunk_starts = o.virtual_stages > 1 ? mine_chunks.chunk_starts : std::vector<int>{},
                               .timeout = parts.mesh.world().options().timeout});
  } else {
    parts.schedule = std::make_unique<LocalSchedule>(o.microbatches, o.microbatch_max);
  }
  if (o.sync_batch_norm && world.valid()) synchronize_batch_norm(*out.model, parts.mesh.group(Axis::data));
  // Context ranks hold replicas of the same parameters, each with its tokens' share of
  // the gradient: they average with the data axis.
  const comm::Communicator& replicas = parts.mesh.data_context_group();
  const bool sync = o.strategy == "allreduce" || (o.strategy == "auto" && replicas.size() > 1);
  if (o.strategy == "zero") {
    if (!world.valid()) fail<ConfigError>("parallel.strategy = zero needs a job's communicator");
    // With experts, after they are split (below): one layout per parameter group.
    if (o.expert <= 1) parts.grad_sync = std::make_unique<zero::ZeroSync>(replicas, o.zero, out.model);
  } else if (o.strategy == "skeleton") {
    // Each pipeline stage's replicas combine among themselves: they hold the same shapes.
    parts.aggregation = std::make_unique<skeleton::SkeletonPartition>(parts.mesh.group(Axis::data), o.skeleton);
  } else if (o.strategy == "local_sgd" || o.strategy == "bmuf") {
    averaging::ModelAveragingOptions a = o.averaging;
    a.bmuf = o.strategy == "bmuf";
    // Negative: Chen & Huo's eta = 1 - 1/W.
    if (a.block_momentum < 0) a.block_momentum = 1.0 - 1.0 / parts.mesh.degree(Axis::data);
    parts.aggregation = std::make_unique<averaging::ModelAveraging>(parts.mesh.group(Axis::data), a);
  } else if (o.strategy == "easgd") {
    parts.aggregation = std::make_unique<averaging::Easgd>(parts.mesh.group(Axis::data), o.easgd);
  } else if (o.strategy == "admm") {
    parts.aggregation = std::make_unique<averaging::Admm>(parts.mesh.group(Axis::data), o.admm);
  } else if (o.strategy == "gossip") {
    // Each pipeline stage's replicas mix among themselves: they hold the same shapes.
    parts.aggregation = std::make_unique<gossip::Gossip>(parts.mesh.group(Axis::data), o.gossip);
  } else if (o.strategy == "hybrid") {
    // Each pipeline stage's replicas close their steps among themselves
    // (through that stage's data rank 0, or in their own all-reduces).
    if (o.hybrid.via == hybrid::Via::allreduce) {
      parts.aggregation = std::make_unique<hybrid::DeadlineAllreduce>(parts.mesh.group(Axis::data), o.hybrid);
    } else {
      parts.aggregation = std::make_unique<hybrid::TimeoutHybrid>(parts.mesh.group(Axis::data), o.hybrid);
    }
  } else if (sync && world.valid()) {
    const comm::Communicator& data = replicas;
    std::unique_ptr<BucketHook> hook;
    if (o.codec.name != "none") hook = std::make_unique<CodecHook>(data, o.codec, o.data_parallel.timeout);
    parts.grad_sync = std::make_unique<BucketedAllreduce>(data, o.data_parallel, std::move(hook));
  }
  // Last, so the pipeline cut and ZeRO-3 see the embedding they know; the
  // embedding then takes this rank's tokens (names unchanged).
  if (parts.context) {
    if (auto seq = std::dynamic_pointer_cast<nn::Sequential>(out.model)) context_parallel::apply(*seq, *parts.context);
  }
  // Expert parallelism: this rank's experts of every MoE layer (of this
  // stage), their gradients combined over their replicas, the rest as before.
  if (o.expert > 1) {
    if (!world.valid() || (!parts.grad_sync && o.strategy != "zero")) {
      fail<ConfigError>("parallel.expert = {} needs a job whose data axis all-reduces gradients", o.expert);
    }
    expert_parallel::ExpertGroups groups = expert_parallel::split_expert_groups(parts.mesh.group(Axis::data), o.expert);
    std::set<std::string> names = expert_parallel::shard_experts(*out.model, groups);
    std::unique_ptr<zero::ZeroSync> expert_zero;
    if (o.strategy == "zero") {
      // The rest split over the data axis, each expert over its replicas.
      parts.grad_sync = std::make_unique<zero::ZeroSync>(replicas, o.zero, out.model,
                                                         [&names](const std::string& n) { return !names.count(n); });
      expert_zero = std::make_unique<zero::ZeroSync>(groups.replicas, o.zero, out.model,
                                                     [&names](const std::string& n) { return names.count(n) > 0; });
    }
    parts.grad_sync = std::make_unique<expert_parallel::ExpertDataSync>(
        std::move(parts.grad_sync), std::move(groups), std::move(names), *out.model, std::move(expert_zero));
  }
  out.plan = std::make_unique<Plan>(std::move(parts));
  return out;
}

}  // namespace braid::parallel
