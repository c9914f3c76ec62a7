// Fusion: patterns of registry ops that one existing kernel computes in fewer
// passes over memory, rewritten into that kernel. Each rule gives the same
// numbers bit for bit (up to the sign of a zero).
//
//   copy + accumulate    c = clone(x); accumulate_(c, y)  ->  add(x, y)
//                        (the autograd engine sums a gradient that reaches a
//                        value twice this way: one pass instead of two)
//   slice gradients      accumulate_ over slice_backward's of disjoint slices
//                        that tile one dimension  ->  concat of the pieces
//                        (the q, k, v split of attention: no zero fill and no
//                        accumulations)
//
// A rule applies only where the intermediate values have no other reader and
// all its nodes are on one rank.
#pragma once

#include "braid/graph/graph.h"

namespace braid::graph {

Graph fuse(const Graph& graph);

}  // namespace braid::graph
