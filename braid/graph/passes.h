// Passes over a graph. Each returns a new graph that computes the same outputs
// and updates; each can be run alone and tested on small graphs.
//
//   dead code       nodes whose results reach no output and no update go
//                   (random ops stay: dropping one would move the generator)
//   common subexpressions
//                   a pure node with the same op, attributes and inputs as an
//                   earlier one is replaced by it (unless an in-place node
//                   later writes either result: two clones that are each
//                   accumulated into are two buffers)
//   constant folding
//                   a pure node whose inputs are all constants is computed
//                   now and becomes a constant (results up to `max_elements`,
//                   so folding never turns a broadcast scalar into a weight-
//                   sized constant; never a result written in place later)
#pragma once

#include <cstdint>
#include <string>

#include "braid/graph/graph.h"

namespace braid::graph {

Graph eliminate_dead_code(const Graph& graph);
// A clone of a fresh result that nothing else reads is that result: the
// clone goes (the autograd engine clones a gradient it cannot prove it owns,
// and during capture it never can). So is a clone that is then written in
// place (a gradient summed into) after the source's last other reader: the
// write goes to the source's buffer, an in-place update instead of a copy.
Graph elide_copies(const Graph& graph);
// A reshape, squeeze or unsqueeze to the shape it had, or a permute that
// keeps every dimension in place, is its input.
Graph elide_identity_views(const Graph& graph);
Graph eliminate_common_subexpressions(const Graph& graph);
Graph fold_constants(const Graph& graph, int64_t max_elements = 4096);

// The passes above and fusion (fuse.h) until nothing changes, with each
// pass's effect.
struct PassReport {
  std::string pass;
  size_t nodes_before = 0, nodes_after = 0;
};
Graph simplify(const Graph& graph, std::vector<PassReport>* report = nullptr);

}  // namespace braid::graph
