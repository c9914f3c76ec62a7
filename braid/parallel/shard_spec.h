// How a rank's parameter is a slice of the whole model's tensor (tensor
// parallelism), for checkpoints that merge into one process and for norms
// that count every element once.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/tensor/shape.h"

namespace braid::parallel {

struct ShardSpec {
  int dim = -1;         // the tensor is sliced along this dim; -1: replicated across the tensor axis
  Shape full_shape{};   // the whole tensor's shape
  int64_t offset = 0;   // where this rank's slice starts along dim
};

// By parameter name; a name that is absent is the whole tensor (replicated).
using ShardSpecs = std::map<std::string, ShardSpec>;

nlohmann::json to_json(const ShardSpecs& specs);
ShardSpecs shard_specs_from_json(const nlohmann::json& j);

}  // namespace braid::parallel
