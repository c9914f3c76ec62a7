// The Work-Depth view of a graph: work W is the sum of every node's
// operations, depth D the longest chain of dependent steps through the graph
// (each node contributes its op's own depth: 1 for a map, ceil(log2 n) for a
// sum of n). W/D is the average parallelism, and on p processors a greedy
// schedule finishes within W/p + D steps (Brent's bound).
#pragma once

#include <map>
#include <string>

#include "braid/graph/graph.h"

namespace braid::graph {

struct FamilyFigures {
  double work = 0;   // operations
  double bytes = 0;  // bytes read and written
  int64_t nodes = 0;
};

struct WorkDepth {
  double work = 0;
  double depth = 0;
  double bytes = 0;
  int64_t nodes = 0;
  std::map<std::string, FamilyFigures> families;  // by op family
  double parallelism() const { return depth > 0 ? work / depth : 0; }
  // Brent's bound on the steps p processors need.
  double steps_bound(double p) const { return work / p + depth; }
};

WorkDepth work_depth(const Graph& graph);

// A table: per family work, share and bytes, then W, D, W/D and the bound for
// each p in `processors`.
std::string to_text(const WorkDepth& wd, const std::vector<int>& processors = {1, 2, 8, 64});

}  // namespace braid::graph
