// Where every rank stood when collective #S failed, in words: the sentence a
// failing collective's error carries and `braid inspect history` prints.
//
//   desync at #17: rank 1 is at broadcast #17 (8 bytes, root 0) while ranks 0, 2, 3
//   are at allreduce #17 (4 MiB f32 sum)
//   rank 3 never started #17; its last finished op is #16 allreduce (4 MiB f32 sum)
//   rank 2 did not answer (dead, or its process stopped)
//   every rank arrived at #17
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/comm/history.h"

namespace braid::comm {

struct Explanation {
  std::string text;
  bool desync = false;  // some ranks made a different call at #S
  std::vector<int> behind;  // ranks that never started #S
  std::vector<int> silent;  // ranks without a Position (no answer, no dump)
};

// ranks[r]: rank r's Position relative to `seq` (nullopt: unknown).
Explanation explain(uint64_t seq, const std::vector<std::optional<Position>>& ranks);

// "rank 3" / "ranks 0, 2, 3".
std::string name_ranks(const std::vector<int>& ranks);

}  // namespace braid::comm
