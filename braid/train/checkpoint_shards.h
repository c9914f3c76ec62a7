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

#include "braid/train/checkpoint.h"

namespace braid::train {

// The shard folders in `dir` ("shard-t0-p1", ...), sorted; empty when the run
// was not sharded.
std::vector<std::string> shard_folders(const std::string& dir);

// The newest step every shard folder has a complete checkpoint of; nullopt
// when there is none.
std::optional<int64_t> latest_common_shard_step(const std::string& dir);

// Reads every shard's checkpoint of `step` and assembles the whole model:
// slices concatenated along their dim, replicated tensors taken once,
// stages' parameters side by side. Optimizer buffers shaped like their
// parameter's slice are assembled the same way and renumbered by
// `param_order` (the whole model's parameter names in registration order);
// scalars (step counts, hyper-parameters) come from shard t0-p0. IoError when
// a shard is missing or its slices do not tile the whole tensor.
Checkpoint merge_shard_checkpoints(const std::string& dir, int64_t step, const std::vector<std::string>& param_order);

}  // namespace braid::train
