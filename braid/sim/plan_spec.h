// The plan a config runs, as the simulator needs it: the mesh's degrees, the
// schedule, the gradient synchronisation and the replica aggregation, read
// from the same keys `braid train` reads (train/trainer_setup.h's
// plan_options), for a job of `world` ranks.
#pragma once

#include <string>

#include "braid/comm/algorithms/algorithms.h"
#include "braid/train/config.h"

namespace braid::sim {

struct PlanSpec {
  // "none" (one process), "allreduce", "ps" (parameter servers), "local_sgd".
  std::string strategy = "none";
  int world = 1;     // every rank of the job, servers included
  int servers = 0;   // parameter servers: world ranks 0..servers-1 (the transport's first ranks)
  int data = 1, tensor = 1, pipeline = 1;  // the workers' mesh: data * tensor * pipeline = world - servers
  // parallel.expert: groups of `expert` neighbouring data ranks share out each
  // MoE layer's experts (it divides data and model.moe.experts; docs/moe.md).
  int expert = 1;
  // parallel.sequence_parallel and parallel.tp_overlap (with tensor > 1;
  // docs/tensor_parallel.md): a block's all-reduces as all-gather +
  // reduce-scatter pairs, and the collectives pipelined with their GEMMs.
  bool sequence_parallel = false;
  bool tp_overlap = false;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zero_bubble (with pipeline > 1)
  int virtual_stages = 1;         // interleaved: chunks per pipeline rank
  int microbatches = 1;
  std::string recompute = "none";  // parallel.recompute: none | full | selective
  int64_t recompute_layers = 0;     // the first N blocks (0: all)
  double bucket_bytes = 1 << 20;
  bool overlap = true;
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  std::string codec = "none";
  std::string consistency = "bsp";  // ps: bsp | asp | ssp | softsync
  int local_sgd_period = 1;
  int64_t batch = 0;   // examples per replica per step
  int threads = 1;     // intra-op threads per rank (train.threads, or the host's cores over its ranks)

  int workers() const { return world - servers; }
  // "allreduce: data 4 (ring or auto), buckets 1024 KiB overlapped; batch 64 per replica, 1 thread"
  std::string describe() const;
};

// The plan `braid train` would run for `config` on `world` ranks, `servers` of
// them parameter servers (braid launch --servers), on hosts of `cores` cores
// holding `ranks_per_host` ranks each. ConfigError for a strategy the
// simulator does not model (naming the ones it does) or degrees that do not
// divide the workers.
PlanSpec plan_spec(const train::Config& config, int world, int servers, int ranks_per_host, int cores);

}  // namespace braid::sim
