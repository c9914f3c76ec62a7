#include "braid/parallel/plan_factory.h"

namespace braid::parallel {

std::vector<std::string> strategy_names() { return {"auto", "none", "allreduce", "ps"}; }

namespace {

void check_strategy(const std::string& name) {
  for (const std::string& n : strategy_names()) {
    if (n == name) return;
  }
  fail<ConfigError>("unknown parallel.strategy '{}' (known: {})", name, strategy_names());
}

}  // namespace

PlannedModel make_plan(const PlanOptions& o, const comm::Communicator& world,
                       std::shared_ptr<comm::Transport> transport, std::shared_ptr<nn::Module> model,
                       nn::LossFn loss) {
  check_strategy(o.strategy);
  PlannedModel out{.model = std::move(model), .loss = std::move(loss), .plan = nullptr};
  PlanParts parts;
  if (o.strategy == "ps") {
    if (o.mesh.tensor > 1 || o.mesh.pipeline > 1) {
      fail<ConfigError>("parallel.strategy = ps trains whole replicas: parallel.tensor and parallel.pipeline must "
                        "be 1 (got {} and {})", o.mesh.tensor, o.mesh.pipeline);
    }
    if (!transport) fail<ConfigError>("parallel.strategy = ps needs the job's transport");
    parts.aggregation = std::make_unique<ParameterServer>(std::move(transport), o.ps);
    parts.schedule = std::make_unique<LocalSchedule>(o.microbatches);
    out.plan = std::make_unique<Plan>(std::move(parts));
    return out;
  }
  if (world.valid()) parts.mesh = Mesh::build(world, o.mesh);
  if (parts.mesh.degree(Axis::tensor) > 1 || parts.mesh.degree(Axis::pipeline) > 1) {
    fail<ConfigError>("parallel.tensor and parallel.pipeline > 1 are not available in this build");
  }
  parts.schedule = std::make_unique<LocalSchedule>(o.microbatches);
  const bool sync = o.strategy == "allreduce" || (o.strategy == "auto" && parts.mesh.degree(Axis::data) > 1);
  if (sync && world.valid()) {
    comm::Communicator data = parts.mesh.group(Axis::data);
    parts.grad_sync = std::make_unique<BucketedAllreduce>(data, o.data_parallel);
  }
  out.plan = std::make_unique<Plan>(std::move(parts));
  return out;
}

}  // namespace braid::parallel
