#include "braid/train/device_plans.h"

#include <string>

#include "braid/base/error.h"

namespace braid::train {

namespace {

using parallel::Axis;
using parallel::Plan;

std::string aggregation_name(const Plan& p) { return p.aggregation() ? p.aggregation()->name() : ""; }
bool aggregation_is(const Plan& p, std::initializer_list<std::string_view> names) {
  const std::string n = aggregation_name(p);
  for (std::string_view k : names) {
    if (n.rfind(k, 0) == 0) return true;
  }
  return false;
}
bool pipeline_schedule_is(const Plan& p, const Config& c, std::string_view schedule) {
  return p.mesh().degree(Axis::pipeline) > 1 && c.get_string("parallel.schedule") == schedule;
}

}  // namespace

const std::vector<DevicePlanRow>& device_plan_table() {
  static const std::vector<DevicePlanRow> rows{
      // Run on a device (tests/cuda/emulated_multi_plans_test.cc: world sizes
      // 2-4 on the emulated device against the same plan on the CPU).
      {"data-parallel all-reduce (parallel.strategy = allreduce)",
       [](const Plan& p, const Config&) { return p.grad_sync_name() == "allreduce"; }, ""},
      {"ZeRO (parallel.zero_stage)",
       [](const Plan& p, const Config&) { return p.grad_sync_name().rfind("zero-", 0) == 0; }, ""},
      {"pipeline parallelism (parallel.pipeline), GPipe",
       [](const Plan& p, const Config& c) { return pipeline_schedule_is(p, c, "gpipe"); }, ""},
      {"pipeline parallelism (parallel.pipeline), 1F1B",
       [](const Plan& p, const Config& c) { return pipeline_schedule_is(p, c, "1f1b"); }, ""},
      // tests/cuda/emulated_multi_codec_test.cc; the codecs' kernels bit for
      // bit against the host codecs in device_codec_test.cc.
      {"gradient codecs (parallel.codec = fp16, bf16, qsgd, onebit, topk)",
       [](const Plan&, const Config& c) { return c.get_string("parallel.codec") != "none"; }, ""},
      {"local SGD (parallel.strategy = local_sgd)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"local_sgd"}); }, ""},
      // Refused, each with what keeps it on the host.
      {"pipeline parallelism (parallel.pipeline), interleaved",
       [](const Plan& p, const Config& c) { return pipeline_schedule_is(p, c, "interleaved"); },
       "activations on a device are matched first in first out per pair of stages, not by tag, and the order in "
       "which the chunks' messages cross has not been checked on a device"},
      {"pipeline parallelism (parallel.pipeline), zero bubble",
       [](const Plan& p, const Config& c) { return pipeline_schedule_is(p, c, "zero_bubble"); },
       "activations on a device are matched first in first out per pair of stages, not by tag, and the split "
       "backward's order has not been checked on a device"},
      {"tensor parallelism (parallel.tensor)",
       [](const Plan& p, const Config&) { return p.mesh().degree(Axis::tensor) > 1; },
       "its collectives, the vocabulary-parallel cross-entropy and the overlapped products still build host "
       "tensors (braid/parallel/tensor_parallel)"},
      {"context parallelism (parallel.context)",
       [](const Plan& p, const Config&) { return p.mesh().degree(Axis::context) > 1; },
       "ring attention's blocks and Ulysses' all-to-all still pass host buffers"},
      {"expert parallelism (parallel.expert)",
       [](const Plan& p, const Config&) { return p.grad_sync_name().find("experts over") != std::string::npos; },
       "the tokens' exchange is an all-to-all with uneven splits, which device buffers do not have yet"},
      {"PowerSGD (parallel.codec = powersgd)",
       [](const Plan&, const Config& c) { return c.get_string("parallel.codec") == "powersgd"; },
       "its products and orthogonalisation have no device kernels yet (the other codecs run on the device)"},
      {"parameter servers (parallel.strategy = ps)",
       [](const Plan& p, const Config&) { return p.grad_sync_name() == "ps"; },
       "workers push and pull through host memory; pinned staging for device workers is not built"},
      {"model averaging (BMUF, EASGD, ADMM)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"bmuf", "easgd", "admm"}); },
       "BMUF's block state, EASGD's center and ADMM's duals are kept and updated in host memory (local SGD runs "
       "on the device)"},
      {"gossip (parallel.strategy = gossip)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"gossip"}); },
       "neighbours exchange host copies of the parameters"},
      {"the deadline hybrid (parallel.strategy = hybrid)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"hybrid"}) || p.grad_sync_name() == "hybrid"; },
       "late gradients are kept and summed in host memory"},
      {"skeleton partitions (parallel.strategy = skeleton)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"skeleton"}) || p.grad_sync_name() == "skeleton"; },
       "the skeleton is gathered and reduced through host buffers"},
      {"ensembles (parallel.strategy = ensemble)",
       [](const Plan& p, const Config&) { return aggregation_is(p, {"ensemble"}); },
       "the members' predictions are averaged in host memory"},
      // Whatever a later plan adds before it has a row of its own.
      {"a replica aggregation",
       [](const Plan& p, const Config&) { return p.aggregation() != nullptr && !aggregation_is(p, {"local_sgd"}); },
       "it has not been checked on a device"},
      {"a gradient synchronisation",
       [](const Plan& p, const Config&) {
         const std::string n = p.grad_sync_name();
         return !n.empty() && n != "allreduce" && n.rfind("zero-", 0) != 0;
       },
       "it has not been checked on a device"},
  };
  return rows;
}

void check_plan_on_device(const Plan& plan, const Config& c, Device device) {
  if (device.is_cpu()) return;
  for (const DevicePlanRow& row : device_plan_table()) {
    if (!row.refusal.empty() && row.uses(plan, c)) {
      fail<ConfigError>("train.device = {}: {} does not run on a GPU yet: {} (plan: {}); use train.device = cpu",
                        name(device), row.plan, row.refusal, plan.describe());
    }
  }
}

comm::DeviceComm device_comm_option(const Config& c, Device device) {
  if (device.is_cpu()) return comm::DeviceComm::automatic;
  return comm::parse_device_comm(c.get_string("parallel.device_comm"));
}

}  // namespace braid::train
