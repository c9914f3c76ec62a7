#include "braid/train/replica_run.h"

#include <cstdlib>

#include "braid/base/digest.h"
#include "braid/comm/env.h"

namespace braid::train {

void check_replica_plan(const Config& c, const parallel::PlanOptions& po) {
  const std::string& strategy = c.get_string("parallel.strategy");
  if (strategy != "allreduce" && strategy != "auto") {
    fail<ConfigError>("parallel.fault_tolerance = replica serves parallel.strategy = allreduce; {} is not built for "
                      "in-job recovery yet (use parallel.fault_tolerance = none with braid launch --max-restarts)",
                      strategy);
  }
  if (po.mesh.tensor > 1 || po.mesh.pipeline > 1 || po.mesh.context > 1 || po.expert > 1) {
    fail<ConfigError>("parallel.fault_tolerance = replica replaces whole-model replicas of one process each; "
                      "parallel.tensor, pipeline, context and expert must be 1 (a replica of several processes is "
                      "not built yet)");
  }
  if (po.codec.name != "none") {
    fail<ConfigError>("parallel.fault_tolerance = replica averages plain f32 gradients; parallel.codec = {} is not "
                      "built for it", po.codec.name);
  }
  if (po.sync_batch_norm) {
    fail<ConfigError>("parallel.fault_tolerance = replica: model.norm = sync_batch all-reduces inside forward, which "
                      "a lost replica would stop (use model.norm = batch)");
  }
  if (c.get_string("train.checkpoint_format") == "sharded") {
    fail<ConfigError>("parallel.fault_tolerance = replica writes whole checkpoints from replica 0; "
                      "train.checkpoint_format = sharded is not built for it");
  }
  if (const std::string& t = c.get_string("parallel.transport"); t != "auto" && t != "tcp") {
    fail<ConfigError>("parallel.fault_tolerance = replica connects each membership over tcp; parallel.transport = {} "
                      "cannot be rebuilt over the survivors", t);
  }
}

ReplicaJoin join_replica_group(const Config& c, Duration timeout) {
  const comm::Env env = comm::read_env();
  if (env.source != "launch") {
    fail<ConfigError>("parallel.fault_tolerance = replica needs the job's store: start the replicas with braid launch "
                      "(or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and BRAID_TOKEN as it does)");
  }
  if (env.ps_servers > 0) {
    fail<ConfigError>("parallel.fault_tolerance = replica: this job was started with parameter servers");
  }
  const char* join = std::getenv("BRAID_REPLICA_JOIN");
  comm::StoreOptions so = comm::store_options(env);
  so.who = fmt::format("replica {}", env.rank);
  comm::Store store(so);
  const std::string text = c.to_json().dump();
  // The join flag is in the environment, not the config, so a replacement
  // runs the very config the members run and its digest says so.
  const std::string digest = fmt::format("{:08x}", crc32({reinterpret_cast<const std::byte*>(text.data()), text.size()}));
  parallel::fault_tolerance::ReplicaGroupOptions o{
      .slot = env.rank, .slots = env.size, .joining = join != nullptr && std::string(join) == "1",
      .prefix = fmt::format("braid/restart{}/replicas", env.restart), .config_hash = digest, .timeout = timeout,
      // Dead within a third of the timeout (at most 1 s): the survivors of
      // a kill -9 go on in about that, well inside twice the timeout.
      .max_silence = std::clamp<Duration>(timeout / 3, std::chrono::milliseconds(100), std::chrono::seconds(1)),
      .token = env.token, .host = env.host};
  return {.group = std::make_shared<parallel::fault_tolerance::ReplicaGroup>(store, std::move(o)),
          .slot = env.rank, .slots = env.size};
}

}  // namespace braid::train
