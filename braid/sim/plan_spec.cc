#include "braid/sim/plan_spec.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/base/error.h"

namespace braid::sim {

std::string PlanSpec::describe() const {
  std::string s = strategy;
  if (strategy == "ps") s += fmt::format(" {} ({} servers, {} workers)", consistency, servers, workers());
  s += fmt::format(": data {} x tensor {} x pipeline {}", data, tensor, pipeline);
  if (expert > 1) s += fmt::format(" (expert groups of {})", expert);
  if (tensor > 1) {
    s += fmt::format(" ({}{})", sequence_parallel ? "sequence parallel" : "plain TP",
                     tp_overlap ? ", collectives overlapped" : ", blocking");
  }
  if (pipeline > 1)
    s += fmt::format(", {}{} with {} micro-batches{}", schedule,
                     virtual_stages > 1 ? fmt::format(" of {} chunks per rank", virtual_stages) : "", microbatches,
                     recompute != "none" ? " (recompute " + recompute + ")" : "");
  else if (microbatches > 1)
    s += fmt::format(", gradients of {} micro-batches accumulated", microbatches);
  if (data > 1 && (strategy == "allreduce" || strategy == "local_sgd")) {
    s += fmt::format(", {} buckets of {:.0f} KiB {}", comm::name(algorithm), bucket_bytes / 1024,
                     overlap ? "overlapped" : "after backward");
    if (codec != "none") s += fmt::format(", codec {}", codec);
    if (strategy == "local_sgd") s += fmt::format(", averaged every {} steps", local_sgd_period);
  }
  s += fmt::format("; batch {} per replica, {} thread{}", batch, threads, threads == 1 ? "" : "s");
  return s;
}

PlanSpec plan_spec(const train::Config& c, int world, int servers, int ranks_per_host, int cores) {
  if (world < 1 || servers < 0 || servers >= world) {
    fail<ConfigError>("braid sim: {} ranks with {} parameter servers leaves no worker", world, servers);
  }
  PlanSpec p;
  p.world = world;
  p.servers = servers;
  p.tensor = static_cast<int>(c.get_int("parallel.tensor"));
  p.pipeline = static_cast<int>(c.get_int("parallel.pipeline"));
  const int workers = world - servers;
  const int model_ranks = p.tensor * p.pipeline;
  const auto data = c.get_int("parallel.data");
  if (workers % model_ranks != 0 || (data > 0 && data * model_ranks != workers)) {
    fail<ConfigError>("braid sim: {} workers do not split into data {} x tensor {} x pipeline {}", workers,
                      data > 0 ? std::to_string(data) : "auto", p.tensor, p.pipeline);
  }
  p.data = workers / model_ranks;
  std::string strategy = c.get_string("parallel.strategy");
  if (strategy == "auto") strategy = servers > 0 ? "ps" : (p.data > 1 ? "allreduce" : "none");
  if (servers > 0 && strategy != "ps") {
    fail<ConfigError>("braid sim: --servers is for parallel.strategy = ps (the config says {})", strategy);
  }
  if (strategy == "ps" && servers == 0) fail<ConfigError>("braid sim: parallel.strategy = ps needs --servers S");
  if (strategy == "ps" && model_ranks > 1) {
    fail<ConfigError>("braid sim: parameter servers with tensor or pipeline parallelism are not modelled");
  }
  if (strategy == "none" && p.data > 1) {
    fail<ConfigError>(
        "braid sim: parallel.strategy = none trains one replica, but {} workers make {} data-parallel replicas "
        "(set a strategy)",
        workers, p.data);
  }
  constexpr const char* kModelled[] = {"none", "allreduce", "ps", "local_sgd"};
  if (std::find(std::begin(kModelled), std::end(kModelled), strategy) == std::end(kModelled)) {
    fail<ConfigError>(
        "braid sim: parallel.strategy = {} is not modelled (the simulator models none, allreduce, ps "
        "and local_sgd)",
        strategy);
  }
  p.strategy = strategy;
  p.expert = static_cast<int>(c.get_int("parallel.expert"));
  if (p.expert > 1) {
    // As the trainer refuses them (docs/moe.md), each naming the keys.
    const int64_t experts = c.get_string("model.name") == "gpt" ? c.get_int("model.moe.experts") : 0;
    if (experts <= 0) fail<ConfigError>("braid sim: parallel.expert = {} needs MoE layers (model.moe.experts)", p.expert);
    if (experts % p.expert != 0) {
      fail<ConfigError>("braid sim: model.moe.experts = {} is not divisible by parallel.expert = {}", experts, p.expert);
    }
    if (p.data % p.expert != 0) {
      fail<ConfigError>("braid sim: parallel.expert = {} does not divide the data degree {}", p.expert, p.data);
    }
    if (strategy != "allreduce") {
      fail<ConfigError>("braid sim: parallel.expert > 1 needs parallel.strategy = allreduce (the config says {})",
                        strategy);
    }
  }
  // As the trainer reads them (run_options.cc).
  p.sequence_parallel = c.get_bool("parallel.sequence_parallel");
  if (p.sequence_parallel && p.tensor <= 1) {
    fail<ConfigError>("braid sim: parallel.sequence_parallel = true splits the sequence over the tensor axis; "
                      "parallel.tensor = {} has none", p.tensor);
  }
  if (p.tensor > 1) p.tp_overlap = c.get_bool("parallel.tp_overlap");
  p.schedule = c.get_string("parallel.schedule");
  if (p.pipeline > 1) p.virtual_stages = static_cast<int>(c.get_int("parallel.virtual_stages"));
  p.recompute = c.get_string("parallel.recompute");
  if (p.recompute != "none") p.recompute_layers = c.get_int("parallel.recompute_layers");
  p.bucket_bytes = static_cast<double>(c.get_int("parallel.bucket_kb")) * 1024;
  p.overlap = c.get_bool("parallel.overlap");
  p.algorithm = comm::parse_algorithm(c.get_string("parallel.algorithm"));
  p.codec = c.get_string("parallel.codec");
  p.consistency = c.get_string("ps.consistency");
  p.local_sgd_period = std::max<int>(1, static_cast<int>(c.get_int("local_sgd.period")));
  p.batch = c.get_int("train.batch_size");
  // Every plan runs its micro-batches: a pipeline stage's schedule, or the
  // gradient accumulation of parallel/step_schedule.h, which also splits a
  // batch past parallel.microbatch_max rows.
  p.microbatches = static_cast<int>(c.get_int("parallel.microbatches"));
  if (const int64_t max_rows = c.get_int("parallel.microbatch_max"); max_rows > 0 && p.pipeline == 1) {
    p.microbatches = static_cast<int>(std::max<int64_t>(p.microbatches, (p.batch + max_rows - 1) / max_rows));
  }
  if (p.batch % p.microbatches != 0) {
    fail<ConfigError>("braid sim: train.batch_size {} does not split into {} micro-batches", p.batch, p.microbatches);
  }
  // As the trainer sizes its pool (trainer_setup.cc): train.threads, else the
  // host's cores shared by its ranks.
  const int64_t threads = c.get_int("train.threads");
  p.threads = threads > 0 ? static_cast<int>(threads) : std::max(1, cores / std::max(1, ranks_per_host));
  return p;
}

}  // namespace braid::sim
