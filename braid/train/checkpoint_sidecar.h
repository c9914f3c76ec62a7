// Reading a checkpoint's JSON sidecar (checkpoint.h) as bytes from outside:
// parsed, then checked against every field braid reads from it, so a
// malformed or hostile sidecar is one IoError naming the file and the field,
// never a JSON library's exception (or a huge allocation) later in whichever
// module reads that field (resume, resharding, `braid inspect checkpoint`).
//
// Checked: step, epoch, batch (integers >= 0), rng {seed, stream, offset}
// (unsigned), tensors_crc32 (u32), optimizer (an object; name a string and
// steps, num_params integers when present), config (an object of section
// objects when present), extra (an object when present: run_id a string,
// params an array of strings, plan and batch_schedule objects, zero {stage,
// data_world} integers, shard {name, mesh strings, params, specs}; each spec
// {dim, offset, blocks >= 1 integers, full_shape of at most 64 dimensions >= 0
// whose product fits 2^40 elements}). Other keys of extra are free-form.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace braid::train {

// The sidecar in `text`; IoError naming `path` when it is not JSON or a field
// braid reads is missing or of the wrong type or range.
nlohmann::json parse_checkpoint_sidecar(std::string_view text, const std::string& path);

}  // namespace braid::train
