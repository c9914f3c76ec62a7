// Pipelined reduce-then-broadcast over binary trees, shared by binary_tree.cc
// and double_binary_tree.cc. Each job is one tree carrying one slice of the
// vector on its own lane; jobs advance chunk by chunk in lock-step, so two
// trees keep both directions of every link busy at once.
#pragma once

#include <span>

#include "braid/comm/algorithms/group.h"

namespace braid::comm {

// One rank's place in a tree (group ranks; -1 where absent).
struct TreeRole {
  int parent = -1;
  int children[2] = {-1, -1};
};

// Heap-shaped tree over p ranks rooted at 0: node i has children 2i+1, 2i+2.
// mirrored: node i sits on rank p-1-i, so the leaves (upper half of ranks in
// the plain tree) become the interior nodes and vice versa.
TreeRole heap_tree_role(int p, int rank, bool mirrored);

struct TreeJob {
  TreeRole role;
  size_t offset;  // elements
  size_t count;   // elements
  uint16_t lane;
};

void tree_allreduce(Group& g, const ReduceArgs& a, std::span<const TreeJob> jobs);

}  // namespace braid::comm
