// A graph in Graphviz's dot language: inputs and constants as ellipses, ops
// as boxes filled by rank (after placement), edges labelled with the value's
// dtype and shape. `dot -Tsvg graph.dot -o graph.svg` draws it.
#pragma once

#include <string>

#include "braid/graph/graph.h"

namespace braid::graph {

std::string to_dot(const Graph& graph);

}  // namespace braid::graph
