// Reading a sharded checkpoint (checkpoint_manifest.h) into what one rank
// trains, whatever plan wrote it.
//
// A rank reads only the tensors its part has, and of each only the pieces it
// needs: where a piece's slice is the rank's own (same tensor-parallel cut),
// the pieces that overlap the elements it needs (all of them, or under ZeRO
// the runs its optimizer updates: RankPart::optimizer_runs), each read with
// pread at the byte range the manifest gives and checked against its CRC
// before use. Where the cut differs (another tensor-parallel degree, a
// replicated tensor now sliced or back), the tensor's pieces are assembled
// into the whole and cut again (checkpoint_shards.h, checkpoint_reshard.h).
#pragma once

#include <cstdint>
#include <string>

#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_reshard.h"

namespace braid::train {

// Step `step`'s sharded checkpoint in `dir` as `part`: model tensors in the
// part's shapes, optimizer buffers numbered by part.param_order, a codec's
// memory when the layout is the part's. IoError naming the file when the
// manifest or a needed piece is missing, damaged (its CRC and the
// manifest's) or does not fit the part. `bytes_read`, when given, receives
// the bytes of the pieces read.
Checkpoint load_sharded_for_part(const std::string& dir, int64_t step, const RankPart& part,
                                 int64_t* bytes_read = nullptr);

// The whole model and optimizer state of step `step` as one process loads
// it: every tensor whole, optimizer buffers numbered by the whole model's
// parameter order (which extra.params records, as in whole checkpoints).
Checkpoint load_sharded_whole(const std::string& dir, int64_t step);

}  // namespace braid::train
