#include "braid/parallel/shard_spec.h"

#include "braid/base/error.h"

namespace braid::parallel {

nlohmann::json to_json(const ShardSpecs& specs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : specs) j[name] = {{"dim", s.dim}, {"full_shape", s.full_shape}, {"offset", s.offset}};
  return j;
}

ShardSpecs shard_specs_from_json(const nlohmann::json& j) {
  ShardSpecs specs;
  if (!j.is_object()) fail<ValueError>("shard specs: expected an object, got {}", j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    specs[it.key()] = {.dim = v.at("dim").get<int>(), .full_shape = v.at("full_shape").get<Shape>(),
                       .offset = v.at("offset").get<int64_t>()};
  }
  return specs;
}

}  // namespace braid::parallel
