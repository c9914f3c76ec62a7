#include "braid/parallel/shard_spec.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::parallel {

std::pair<int64_t, int64_t> shard_range(int64_t n, int parts, int index) {
  if (parts < 1 || index < 0 || index >= parts) fail<ValueError>("shard_range: part {} of {}", index, parts);
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

nlohmann::json to_json(const ShardSpecs& specs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : specs) {
    j[name] = {{"dim", s.dim}, {"full_shape", s.full_shape}, {"offset", s.offset}, {"blocks", s.blocks}};
  }
  return j;
}

ShardSpecs shard_specs_from_json(const nlohmann::json& j) {
  ShardSpecs specs;
  if (!j.is_object()) fail<ValueError>("shard specs: expected an object, got {}", j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    specs[it.key()] = {.dim = json_integer<int>(v.at("dim")), .full_shape = v.at("full_shape").get<Shape>(),
                       .offset = json_integer<int64_t>(v.at("offset")), .blocks = json_integer_or(v, "blocks", 1)};
  }
  return specs;
}

}  // namespace braid::parallel
