// Plans from configuration (`parallel.*`): the mesh, the model's sharding,
// the schedule, the data axis's gradient synchronisation and the replica
// aggregation, each by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/comm/codec/codec.h"
#include "braid/parallel/averaging/admm.h"
#include "braid/parallel/averaging/easgd.h"
#include "braid/parallel/averaging/model_averaging.h"
#include "braid/comm/transport/transport.h"
#include "braid/nn/loss.h"
#include "braid/nn/module.h"
#include "braid/nn/recompute.h"
#include "braid/parallel/bucketed_allreduce.h"
#include "braid/parallel/ensemble.h"
#include "braid/parallel/gossip/gossip.h"
#include "braid/parallel/hybrid/hybrid.h"
#include "braid/parallel/parameter_server.h"
#include "braid/parallel/plan.h"
#include "braid/parallel/skeleton/skeleton.h"
#include "braid/parallel/zero/zero.h"

namespace braid::parallel {

struct PlanOptions {
  // The data axis: "auto" (allreduce when the data degree is > 1), "none",
  // "allreduce", "zero", "ps", "skeleton", "local_sgd", "bmuf", "easgd", "admm",
  // "gossip", "hybrid", "ensemble".
  std::string strategy = "auto";
  MeshShape mesh{};
  // With mesh.context > 1: how attention spans the sequence split over the
  // context axis: "ring" (zig-zag chunks, k and v around the ring) or
  // "ulysses" (all-to-all to whole sequences of H / C heads).
  std::string context_mode = "ring";
  // With mesh.tensor > 1: norms, dropout and residuals on sequence segments
  // (tensor_parallel/sequence_parallel.h), and the tensor-parallel products
  // overlapped with their collectives (tensor_parallel/overlap.h).
  bool sequence_parallel = false;
  bool tp_overlap = true;
  // Expert parallelism: groups of this many data ranks share out each MoE
  // layer's experts (expert_parallel/expert_parallel.h); 1: every rank holds all.
  int expert = 1;
  int microbatches = 1;
  // Without a pipeline: the most rows a rank runs at once; a larger batch is
  // accumulated over more micro-batches (0: no limit).
  int64_t microbatch_max = 0;
  std::string schedule = "1f1b";  // pipeline schedule: gpipe | 1f1b | interleaved | zero_bubble
  int virtual_stages = 1;         // interleaved: chunks per rank
  // Activation recompute of the model's blocks (nn/recompute.h), under any plan.
  nn::RecomputeOptions recompute{};
  // Pipeline cut: first-layer index of stages 1..P-1; empty: balanced by `balance`.
  std::vector<int> stage_boundaries{};
  std::string balance = "params";  // params | time
  // A few examples of input, for `time` balance to measure layers on.
  Tensor sample_input{};
  // Every BatchNorm2d normalises with the statistics of the whole batch across
  // the data axis (sync_batch_norm.h); allreduce and zero only.
  bool sync_batch_norm = false;
  DataParallelOptions data_parallel{};
  // Gradient compression of allreduce buckets and parameter-server pushes
  // (parallel.codec, codec.*; docs/compression.md).
  comm::codec::CodecOptions codec{};
  zero::ZeroOptions zero{};
  ParameterServerOptions ps{};
  skeleton::SkeletonOptions skeleton{};
  // local_sgd and bmuf (`bmuf` set by make_plan from the strategy).
  averaging::ModelAveragingOptions averaging{};
  averaging::EasgdOptions easgd{};
  averaging::AdmmOptions admm{};
  // The job's parameter servers (the transport's first ranks): asynchronous
  // EASGD's center and asynchronous ADMM's z live there.
  int servers = 0;
  EnsembleOptions ensemble{};
  gossip::GossipOptions gossip{};
  hybrid::HybridOptions hybrid{};
};

std::vector<std::string> strategy_names();

// The model and loss a rank trains under a plan: the sharded model (its
// tensor-parallel shard, its pipeline stage) and the loss that goes with it.
struct PlannedModel {
  std::shared_ptr<nn::Module> model;
  nn::LossFn loss;
  std::unique_ptr<Plan> plan;
};

// Builds the plan for this rank (collective over `world` when it is valid).
// `model` is the whole model as built on every rank from the same seed;
// `transport` is needed by "ps" (the servers are its first ranks). Throws
// ConfigError for an unknown name or degrees that do not fit the world.
PlannedModel make_plan(const PlanOptions& options, const comm::Communicator& world,
                       std::shared_ptr<comm::Transport> transport, std::shared_ptr<nn::Module> model,
                       nn::LossFn loss);

}  // namespace braid::parallel
