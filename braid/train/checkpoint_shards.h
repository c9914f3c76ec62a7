// Checkpoints of a sharded model (tensor-parallel slices, pipeline stages),
// merged into the whole model's checkpoint that one process loads.
//
// A sharded run writes one checkpoint folder per shard,
//   <dir>/shard-t<tensor>-p<pipeline>/ckpt-<step>.{safetensors,json}
// (replica 0 of each shard writes it), with the shard's specs in the
// sidecar's extra.shard (parallel/shard_spec.h): for each parameter the dim it
// is sliced along, the whole shape and this slice's offset; and the shard's
// parameter names in order ("params"), which number its optimizer buffers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/parallel/shard_spec.h"
#include "braid/train/checkpoint.h"

namespace braid::train {

// The shard folders in `dir` ("shard-t0-p1", ...), sorted by tensor rank,
// then stage, as numbers (so "p10" comes after "p9"); empty when the run was
// not sharded.
std::vector<std::string> shard_folders(const std::string& dir);

// The shard folders that hold `step`, when they tile a whole tensor x
// pipeline grid (t0..T-1 x p0..P-1); empty otherwise. Runs resumed under
// another layout leave other folders beside them.
std::vector<std::string> shards_of_step(const std::string& dir, int64_t step);

// The newest step some complete grid of shard folders holds (shards_of_step);
// nullopt when there is none. IoError naming the file when that step's shards come
// from different runs (their sidecars' extra.run_id differ): two runs wrote
// into one folder, and no step of it is safe to resume from.
std::optional<int64_t> latest_common_shard_step(const std::string& dir);

// A slice of a tensor as one shard holds it (spec.dim -1: the whole tensor).
struct TensorSlice {
  parallel::ShardSpec spec{};
  Tensor tensor{};
  std::string shard{};  // where it came from, for errors
};

// The whole tensor from its slices: a replicated one is any slice; slices are
// copied to their offsets (in each block) and together must cover the dim
// exactly once. IoError naming the tensor and the shards otherwise.
Tensor assemble_slices(const std::string& name, const std::vector<TensorSlice>& parts);

// One shard's checkpoint of a step, as read from its folder.
struct ShardCheckpoint {
  std::string shard;  // folder name, "shard-t0-p1"
  std::string stem;   // "<dir>/shard-t0-p1/ckpt-00001200"
  Checkpoint ckpt;
};

// Every shard's checkpoint of `step`, read and verified, in shard_folders
// order. IoError naming the file when one is missing, truncated or altered,
// or comes from another run than shard t0-p0's.
std::vector<ShardCheckpoint> load_shard_checkpoints(const std::string& dir, int64_t step);

// The whole model's parameter names in registration order, as the shards of
// `step` recorded them (extra.shard.params): stage after stage, each name
// once. What merge_shard_checkpoints needs when no model is at hand.
std::vector<std::string> shard_param_order(const std::string& dir, int64_t step);

// Reads every shard's checkpoint of `step` (load_shard_checkpoints) and
// assembles the whole model: slices concatenated along their dim, replicated
// tensors taken once, stages' parameters side by side. Optimizer buffers
// shaped like their parameter's slice are assembled the same way and
// renumbered by `param_order` (the whole model's parameter names in
// registration order); scalars (step counts, hyper-parameters) and the run id
// come from shard t0-p0. IoError when a shard is missing, unreadable or from
// another run, or its slices do not tile the whole tensor.
Checkpoint merge_shard_checkpoints(const std::string& dir, int64_t step, const std::vector<std::string>& param_order);

}  // namespace braid::train
