// Resuming a parameter-server job with a different number of servers. When
// the newest complete set of shard checkpoints in the folder was written by
// S' servers, not this job's S, server i builds its shard from that set
// server-0..S'-1-of-S': its dense range
// cut from the concatenation of the old ranges (weights and every updater
// state slot), and every sparse row whose key now maps to it (row, state,
// steps). Every server of the new job reads the same folder and picks the
// same set, so together they hold exactly what the old servers held.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/ps/config.h"
#include "braid/ps/keyspace.h"
#include "braid/ps/shard.h"

namespace braid::ps {

struct ReshardedShard {
  std::unique_ptr<Shard> shard;
  int64_t clock = 0;     // the smallest of the old shards' clocks
  int from_servers = 0;  // S', the count that wrote the set
};

// Builds server `index`'s shard under `layout` (this job's dense total and
// server count S) from the newest complete set in `dir` when another count
// wrote it: among complete sets of any count, the one whose smallest clock is
// highest (ties: the highest smallest update count, then the larger count).
// So a folder that went 2 -> 3 servers and back to 2 resumes from the 3
// servers' set, not the older one of 2. The update count
// and clock are the smallest among the old shards; under bsp they are all
// equal, since every server applies every clock.
//
// nullopt when there is no complete set or the newest is this count's own
// (the server then loads its own file as it is); `notes` gets one line per
// incomplete set ignored, naming the missing files. ConfigError naming the
// file when an old shard was written by another updater or the old dense
// ranges do not add up to `layout.total()` (a different model); IoError
// naming the file when one is torn or truncated.
std::optional<ReshardedShard> reshard_from_checkpoints(const std::string& dir, int index, const DenseLayout& layout,
                                                       const PsConfig& config, std::vector<std::string>* notes);

}  // namespace braid::ps
