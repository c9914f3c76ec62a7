// A graph as JSON: ops by registry name, attributes with their types,
// constants with their values, inputs, outputs and updates. Reading checks
// every op name and re-infers every shape, so a file from another build of
// braid either describes the same computation or is refused.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "braid/graph/graph.h"

namespace braid::graph {

nlohmann::json to_json(const Graph& graph);
// ValueError naming the node or value that does not fit.
Graph from_json(const nlohmann::json& j);

// Atomic write of to_json (temp file + rename); read with from_json.
void save(const Graph& graph, const std::string& path);
Graph load(const std::string& path);

}  // namespace braid::graph
