// Reading the history dumps of a failed job (one rank-<R>.json per rank,
// written by CommFamily::dump_history) and telling the story across ranks:
// what `braid inspect history DIR` prints (docs/reliability.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/comm/explain.h"

namespace braid::comm {

// The dumps in `dir` (or in `dir`/history), ordered by rank. Throws IoError
// when there are none or one is malformed.
std::vector<nlohmann::json> read_history_dumps(const std::string& dir);

// For communicator `id` in `dumps`: the sequence number of its first failure
// (0 if none failed), and every group rank's Position relative to it
// (nullopt for ranks without a dump).
struct CommStory {
  uint32_t id = 0;
  int size = 0;
  uint64_t seq = 0;
  int first_failed_rank = -1;  // group rank whose failure came first (earliest end time)
  std::string first_failure;
  std::vector<std::optional<Position>> ranks;
  std::vector<std::vector<OpRecord>> ops;  // per group rank, oldest first
  Explanation explanation;
};
std::vector<CommStory> history_stories(const std::vector<nlohmann::json>& dumps);

// The stories as text: per communicator, the first failure, the explanation,
// each rank's position, and the last ops side by side.
std::string format_stories(const std::vector<CommStory>& stories, size_t last_ops = 8);

}  // namespace braid::comm
