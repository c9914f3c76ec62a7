// Resuming from a checkpoint written under another plan: another world size,
// ZeRO stage, tensor-parallel degree or pipeline cut. A checkpoint is either
// whole (one folder; ZeRO writes whole tensors too) or sharded by tensor and
// pipeline rank (checkpoint_shards.h); either is turned into the part this
// rank trains: merged into the whole model when its layout is not this
// rank's, then sliced by this rank's shard specs and renumbered in its
// parameter order.
#pragma once

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
};

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
