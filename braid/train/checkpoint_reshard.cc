#include "braid/train/checkpoint_reshard.h"

#include <filesystem>
#include <map>

#include "braid/ops/shape.h"
#include "braid/train/checkpoint_manifest.h"
#include "braid/train/checkpoint_sharded.h"
#include "braid/train/checkpoint_shards.h"

namespace braid::train {

Tensor cut_slice(const std::string& name, const Tensor& whole, const Shape& shape, const parallel::ShardSpec* spec) {
  if (!spec || spec->dim < 0) {
    if (whole.shape() != shape) {
      fail<IoError>("checkpoint: '{}' has shape {}, this run's has {}", name, to_string(whole.shape()), to_string(shape));
    }
    return whole;
  }
  const int dim = spec->dim;
  if (whole.shape() != spec->full_shape) {
    fail<IoError>("checkpoint: '{}' has shape {}, this run slices one of {}", name, to_string(whole.shape()),
                  to_string(spec->full_shape));
  }
  const int64_t block = whole.size(dim) / spec->blocks, len = shape[static_cast<size_t>(dim)] / spec->blocks;
  Tensor out = Tensor::empty(shape, whole.dtype());
  for (int b = 0; b < spec->blocks; ++b) {
    slice(out, dim, b * len, (b + 1) * len).copy_from(slice(whole, dim, b * block + spec->offset, b * block + spec->offset + len));
  }
  return out;
}

Checkpoint part_of_whole(const Checkpoint& whole, const std::vector<std::string>& whole_order, const RankPart& part) {
  Checkpoint c = whole;
  std::map<std::string, Tensor> by_name(whole.model.begin(), whole.model.end());
  auto spec_of = [&](const std::string& name) -> const parallel::ShardSpec* {
    const auto it = part.specs.find(name);
    return it == part.specs.end() ? nullptr : &it->second;
  };
  c.model.clear();
  for (const auto& [name, t] : part.state) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) fail<IoError>("checkpoint: no tensor '{}' for this run's model", name);
    c.model.emplace_back(name, cut_slice(name, it->second, t.shape(), spec_of(name)));
  }
  std::map<std::string, size_t> mine;
  for (size_t j = 0; j < part.param_order.size(); ++j) mine[part.param_order[j]] = j;
  std::map<std::string, Shape> shape_of;
  for (const auto& [name, t] : part.state) shape_of[name] = t.shape();
  c.optimizer.tensors.clear();
  c.plan.clear();  // another layout: other buckets, so codec memory starts afresh
  for (const auto& [key, t] : whole.optimizer.tensors) {
    const size_t dot = key.find('.');
    const size_t i = std::stoul(key.substr(0, dot));
    if (i >= whole_order.size()) fail<IoError>("checkpoint: optimizer buffer '{}' names parameter {} of {}", key, i, whole_order.size());
    const auto j = mine.find(whole_order[i]);
    if (j == mine.end()) continue;  // another stage's parameter
    c.optimizer.tensors.emplace_back(fmt::format("{}.{}", j->second, key.substr(dot + 1)),
                                     cut_slice(key, t, shape_of.at(whole_order[i]), spec_of(whole_order[i])));
  }
  c.optimizer.scalars["num_params"] = part.param_order.size();
  return c;
}

namespace {

// The newest step of a whole-model or tensor/pipeline-sharded checkpoint in
// `dir`, by its files' names (nothing is verified).
std::optional<int64_t> newest_whole_step(const std::string& dir) {
  std::optional<int64_t> newest;
  if (const std::vector<int64_t> steps = list_checkpoints(dir); !steps.empty()) newest = steps.back();
  for (const std::string& s : shard_folders(dir)) {
    if (const std::vector<int64_t> steps = list_checkpoints(dir + "/" + s); !steps.empty())
      newest = std::max(newest.value_or(steps.back()), steps.back());
  }
  return newest;
}

std::optional<Checkpoint> load_whole_for_part(const std::string& dir, const RankPart& part,
                                              std::vector<std::string>* notes, std::vector<std::string>* skipped);

// Step `step`'s sharded checkpoint as `part`, with a note of what was done;
// nullopt, reported through `skipped`, when it is unusable.
std::optional<Checkpoint> try_sharded(const std::string& dir, int64_t step, const RankPart& part,
                                      std::vector<std::string>* notes, std::vector<std::string>* skipped) {
  try {
    Checkpoint c = load_sharded_for_part(dir, step, part);
    if (notes) notes->push_back(fmt::format("read this rank's part of the sharded checkpoint of step {}", step));
    return c;
  } catch (const IoError& e) {
    if (skipped) skipped->push_back(e.what());
    return std::nullopt;
  }
}

}  // namespace

std::optional<Checkpoint> load_for_part(const std::string& dir, const RankPart& part, std::vector<std::string>* notes,
                                        std::vector<std::string>* skipped) {
  // Sharded checkpoints newer than any whole one first, newest first; then
  // the whole ones (which pass over their own unusable steps); then older
  // sharded ones.
  const std::vector<int64_t> sharded = sharded_steps(dir);
  const std::optional<int64_t> whole_newest = newest_whole_step(dir);
  auto it = sharded.rbegin();
  for (; it != sharded.rend() && (!whole_newest || *it > *whole_newest); ++it) {
    if (auto c = try_sharded(dir, *it, part, notes, skipped)) return c;
  }
  if (auto c = load_whole_for_part(dir, part, notes, skipped)) return c;
  for (; it != sharded.rend(); ++it) {
    if (auto c = try_sharded(dir, *it, part, notes, skipped)) return c;
  }
  return std::nullopt;
}

namespace {

std::optional<Checkpoint> load_whole_for_part(const std::string& dir, const RankPart& part,
                                              std::vector<std::string>* notes, std::vector<std::string>* skipped) {
  std::optional<Checkpoint> whole = load_latest_checkpoint(dir, skipped);
  std::vector<std::string> whole_order;
  const std::optional<int64_t> sharded = latest_common_shard_step(dir);
  if (sharded && (!whole || *sharded > whole->step)) {
    // This rank's own shard, when the layout has not changed.
    const std::string own = checkpoint_stem(dir + "/shard-" + part.shard, *sharded);
    if (!part.shard.empty() && std::filesystem::exists(own + ".json")) {
      const nlohmann::json shard = read_checkpoint_sidecar(own).value("extra", nlohmann::json::object()).value("shard", nlohmann::json::object());
      if (shard.value("params", std::vector<std::string>{}) == part.param_order &&
          shard.value("specs", nlohmann::json::object()) == parallel::to_json(part.specs)) {
        return load_checkpoint(own);
      }
    }
    whole_order = shard_param_order(dir, *sharded);
    whole = merge_shard_checkpoints(dir, *sharded, whole_order);
    if (notes) notes->push_back(fmt::format("merged the {} shards of step {} into the whole model", shards_of_step(dir, *sharded).size(), *sharded));
  } else if (whole) {
    whole_order = whole->extra.value("params", std::vector<std::string>{});
    if (whole_order.empty()) {
      if (!part.shard.empty()) {
        fail<IoError>("checkpoint of step {} in {} does not record its parameter order (written before braid kept "
                      "it), so it cannot be cut into shard {}", whole->step, dir, part.shard);
      }
      whole_order = part.param_order;
    }
  }
  if (!whole) return std::nullopt;
  if (part.shard.empty() && whole_order == part.param_order) return whole;
  if (notes) {
    notes->push_back(fmt::format("resharded step {} for this rank's part{}", whole->step,
                                 part.shard.empty() ? "" : " (shard " + part.shard + ")"));
  }
  return part_of_whole(*whole, whole_order, part);
}

}  // namespace

}  // namespace braid::train
