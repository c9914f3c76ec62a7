// Resuming from a checkpoint written under another plan: another world size,
// ZeRO stage, tensor-parallel degree or pipeline cut. A checkpoint is either
// whole (one folder; ZeRO writes whole tensors too) or sharded by tensor and
// pipeline rank (checkpoint_shards.h); either is turned into the part this
// rank trains: merged into the whole model when its layout is not this
// rank's, then sliced by this rank's shard specs and renumbered in its
// parameter order.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/parallel/shard_spec.h"
#include "braid/train/checkpoint.h"

namespace braid::train {

// What this rank trains: its shard folder name ("" unsharded), its model's
// state (names and shapes; values unused), its parameter names in order, and
// how its tensors slice the whole model's.
struct RankPart {
  std::string shard;
  nn::NamedTensors state;
  std::vector<std::string> param_order;
  parallel::ShardSpecs specs;
  // Sharded checkpoints: the runs [begin, end) of each parameter's elements
  // this rank's optimizer updates (ZeRO); only those runs of the parameter's
  // optimizer buffers are read, the rest of each buffer is zeros. A
  // parameter absent: all of it.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> optimizer_runs{};
  // The plan's layout (mesh and gradient sync, as Trainer records it): a
  // codec's memory is restored only under the layout that wrote it.
  std::string layout{};
  int data_rank = 0;
};

// The part of `whole` a tensor of `shape` holds under `spec` (the whole when
// the spec is null or replicated). IoError naming the tensor when the shapes
// do not fit.
Tensor cut_slice(const std::string& name, const Tensor& whole, const Shape& shape, const parallel::ShardSpec* spec);

// `whole` (parameter names numbering its optimizer buffers: `whole_order`)
// cut down to `part`: each tensor sliced by its spec or taken whole, the
// optimizer's buffers renumbered by `part.param_order`. IoError naming the
// tensor when the checkpoint lacks one or its shape does not fit.
Checkpoint part_of_whole(const Checkpoint& whole, const std::vector<std::string>& whole_order, const RankPart& part);

// The newest checkpoint in `dir`, whole or sharded, as `part` (nullopt when
// there is none). `notes` receives what was done ("merged the 4 shards of
// step 12 ...", "resharded ..."), `skipped` the unusable checkpoints passed over.
std::optional<Checkpoint> load_for_part(const std::string& dir, const RankPart& part, std::vector<std::string>* notes,
                                        std::vector<std::string>* skipped);

}  // namespace braid::train
