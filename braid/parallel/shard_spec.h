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
  int64_t offset = 0;   // where this rank's slice starts along dim (within each block)
  // The dim is `blocks` equal blocks sliced alike, this rank's slices of
  // each block side by side (attention's packed q, k, v: 3 blocks of heads).
  int blocks = 1;
};

// By parameter name; a name that is absent is the whole tensor (replicated).
using ShardSpecs = std::map<std::string, ShardSpec>;

// [begin, end) of part `index` when n items go into `parts` parts: the first
// n % parts parts get one item more (vocabularies, hidden widths and batches
// that do not divide evenly).
std::pair<int64_t, int64_t> shard_range(int64_t n, int parts, int index);

nlohmann::json to_json(const ShardSpecs& specs);
ShardSpecs shard_specs_from_json(const nlohmann::json& j);

}  // namespace braid::parallel
