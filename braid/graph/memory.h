// Liveness of a graph's intermediate values in the executor's order: a
// result is born when its node runs and dies after its last reader (graph
// outputs and updates live to the end). Views and in-place results share
// their source's buffer, so they cost nothing of their own and keep the
// source alive. The peak is what the executor needs beyond its inputs and
// constants.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/graph/graph.h"

namespace braid::graph {

struct MemoryPlan {
  int64_t peak_bytes = 0;            // of intermediates at once
  int64_t total_bytes = 0;           // of every intermediate buffer (no reuse at all)
  std::vector<int64_t> live_bytes;   // after each node
  int peak_node = -1;                // where the peak is reached
};

MemoryPlan plan_memory(const Graph& graph);

}  // namespace braid::graph
