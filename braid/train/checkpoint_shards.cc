#include "braid/train/checkpoint_shards.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "braid/ops/shape.h"
#include "braid/parallel/shard_spec.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

}  // namespace

Tensor assemble_slices(const std::string& name, const std::vector<TensorSlice>& parts) {
  const TensorSlice& first = parts.front();
  if (first.spec.dim < 0) return first.tensor;
  const int dim = first.spec.dim, blocks = first.spec.blocks;
  // The whole shape comes from a sidecar: before allocating it, the parts must
  // have it but along `dim`, where together they must span it, so the whole
  // is no larger than the parts read from the tensor files.
  const Shape& full = first.spec.full_shape;
  if (dim >= static_cast<int>(full.size()))
    fail<IoError>("checkpoint shards: '{}' is sliced along dim {} of a {}-dim whole shape", name, dim, full.size());
  int64_t along = 0;
  for (const TensorSlice& p : parts) {
    bool fits = p.tensor.ndim() == static_cast<int64_t>(full.size());
    for (int d = 0; fits && d < static_cast<int>(full.size()); ++d) fits = d == dim || p.tensor.size(d) == full[d];
    if (!fits) {
      fail<IoError>("checkpoint shards: '{}' of shape {} in {} is not a slice of its whole shape {}", name,
                    to_string(p.tensor.shape()), p.shard, to_string(full));
    }
    along += p.tensor.size(dim);
  }
  if (along != full[dim]) {
    fail<IoError>("checkpoint shards: the slices of '{}' add up to {} along dim {}, its whole shape {} has {}", name,
                  along, dim, to_string(full), full[dim]);
  }
  Tensor whole = Tensor::empty(full, first.tensor.dtype());
  if (blocks < 1 || whole.size(dim) % blocks != 0) {
    fail<IoError>("checkpoint shards: '{}' of shape {} cannot be {} blocks along dim {}", name,
                  to_string(whole.shape()), blocks, dim);
  }
  const int64_t block = whole.size(dim) / blocks;
  std::vector<std::pair<int64_t, int64_t>> covered;
  for (const TensorSlice& p : parts) {
    if (p.spec.dim != dim || p.spec.blocks != blocks || p.spec.full_shape != first.spec.full_shape) {
      fail<IoError>("checkpoint shards: '{}' is sliced differently in {} and {}", name, first.shard, p.shard);
    }
    const int64_t len = p.tensor.size(dim) / blocks;
    if (p.spec.offset < 0 || p.spec.offset + len > block || len * blocks != p.tensor.size(dim)) {
      fail<IoError>("checkpoint shards: '{}' slice [{}, {}) of {} lies outside its whole shape {}", name,
                    p.spec.offset, p.spec.offset + len, p.shard, to_string(whole.shape()));
    }
    for (int b = 0; b < blocks; ++b) {
      slice(whole, dim, b * block + p.spec.offset, b * block + p.spec.offset + len)
          .copy_from(slice(p.tensor, dim, b * len, (b + 1) * len));
    }
    covered.emplace_back(p.spec.offset, p.spec.offset + len);
  }
  std::sort(covered.begin(), covered.end());
  int64_t at = 0;
  for (const auto& [b, e] : covered) {
    if (b != at) fail<IoError>("checkpoint shards: '{}' slices leave a gap or overlap at {} along dim {}", name, at, dim);
    at = e;
  }
  if (at != block) fail<IoError>("checkpoint shards: '{}' slices end at {}, not {}", name, at, block);
  return whole;
}

namespace {

// extra.run_id, or "" when the trainer that wrote the checkpoint recorded none.
std::string run_id(const nlohmann::json& extra) {
  const auto it = extra.find("run_id");
  if (it == extra.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string run_text(const std::string& id) { return id.empty() ? "no run id" : fmt::format("run id \"{}\"", id); }

// Refuses shards of one step that two runs wrote (a folder reused without
// clearing it): merged, they would mix two models. `sidecars` holds each
// shard's sidecar path and its extra, shard t0-p0 first. A checkpoint without
// a run id differs from one with, as one trainer writes it on every rank.
void check_one_run(int64_t step, const std::vector<std::pair<std::string, nlohmann::json>>& sidecars) {
  const std::string want = run_id(sidecars.front().second);
  for (const auto& [file, extra] : sidecars) {
    if (const std::string got = run_id(extra); got != want) {
      fail<IoError>("checkpoint shards of step {} come from different runs: {} has {}, {} has {}", step, file,
                    run_text(got), sidecars.front().first, run_text(want));
    }
  }
}

// (tensor rank, stage) of "shard-t<t>-p<p>"; other names sort last.
std::pair<int, int> shard_coords(const std::string& folder) {
  int t = 0, p = 0;
  if (std::sscanf(folder.c_str(), "shard-t%d-p%d", &t, &p) != 2) return {INT_MAX, INT_MAX};
  return {t, p};
}

}  // namespace

std::vector<std::string> shard_folders(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("shard-", 0) == 0) out.push_back(n);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::pair(shard_coords(a), a) < std::pair(shard_coords(b), b);
  });
  return out;
}

std::vector<std::string> shards_of_step(const std::string& dir, int64_t step) {
  std::vector<std::string> have;
  int tensor = 0, stages = 0;
  for (const std::string& s : shard_folders(dir)) {
    if (!fs::exists(checkpoint_stem(dir + "/" + s, step) + ".json")) continue;
    const auto [t, p] = shard_coords(s);
    if (t == INT_MAX) continue;
    have.push_back(s);
    tensor = std::max(tensor, t + 1), stages = std::max(stages, p + 1);
    // The writer's degrees, where its sidecar has them: without them a lone
    // shard-t0-p0 of a two-stage run (its other stage killed before writing
    // the step) would pass for a whole one-stage grid.
    const nlohmann::json shard = read_checkpoint_sidecar(checkpoint_stem(dir + "/" + s, step))
                                     .value("extra", nlohmann::json::object())
                                     .value("shard", nlohmann::json::object());
    tensor = std::max(tensor, shard.value("tensor", 1)), stages = std::max(stages, shard.value("pipeline", 1));
  }
  // A later run under another layout writes other folders beside these; a
  // step counts only where its folders tile a whole tensor x pipeline grid.
  if (have.empty() || static_cast<int64_t>(have.size()) != int64_t{tensor} * stages) return {};
  return have;
}

std::optional<int64_t> latest_common_shard_step(const std::string& dir) {
  std::set<int64_t> steps;
  for (const std::string& s : shard_folders(dir)) {
    for (int64_t step : list_checkpoints(dir + "/" + s)) steps.insert(step);
  }
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::vector<std::string> shards = shards_of_step(dir, *it);
    if (shards.empty()) continue;
    std::vector<std::pair<std::string, nlohmann::json>> sidecars;
    for (const std::string& s : shards) {
      const std::string stem = checkpoint_stem(dir + "/" + s, *it);
      sidecars.emplace_back(stem + ".json", read_checkpoint_sidecar(stem).value("extra", nlohmann::json::object()));
    }
    check_one_run(*it, sidecars);
    return *it;
  }
  return std::nullopt;
}

std::vector<ShardCheckpoint> load_shard_checkpoints(const std::string& dir, int64_t step) {
  const std::vector<std::string> shards = shards_of_step(dir, step);
  if (shards.empty()) fail<IoError>("{}: no complete set of shard-* folders holds step {}", dir, step);
  std::vector<ShardCheckpoint> out;
  std::vector<std::pair<std::string, nlohmann::json>> sidecars;
  for (const std::string& s : shards) {
    const std::string stem = checkpoint_stem(dir + "/" + s, step);
    out.push_back({s, stem, load_checkpoint(stem)});
    sidecars.emplace_back(stem + ".json", out.back().ckpt.extra);
  }
  check_one_run(step, sidecars);
  return out;
}

std::vector<std::string> shard_param_order(const std::string& dir, int64_t step) {
  std::vector<std::string> order;
  for (const std::string& s : shards_of_step(dir, step)) {
    const nlohmann::json side = read_checkpoint_sidecar(checkpoint_stem(dir + "/" + s, step));
    const nlohmann::json shard = side.value("extra", nlohmann::json::object()).value("shard", nlohmann::json::object());
    for (const std::string& name : shard.value("params", std::vector<std::string>{})) {
      if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    }
  }
  return order;
}

Checkpoint merge_shard_checkpoints(const std::string& dir, int64_t step, const std::vector<std::string>& param_order) {
  const std::vector<ShardCheckpoint> loaded = load_shard_checkpoints(dir, step);
  std::map<std::string, std::vector<TensorSlice>> model_parts;
  std::map<std::string, std::vector<TensorSlice>> optim_parts;  // by "<name>.<buffer>"
  std::vector<std::string> model_order;
  std::vector<std::string> shards;
  for (const auto& [s, stem, c] : loaded) {
    shards.push_back(s);
    const nlohmann::json shard = c.extra.value("shard", nlohmann::json::object());
    const parallel::ShardSpecs specs =
        parallel::shard_specs_from_json(shard.value("specs", nlohmann::json::object()));
    // This shard's parameter order: the optimizer's buffer indices.
    const std::vector<std::string> local_params = shard.value("params", std::vector<std::string>{});
    std::map<std::string, Tensor> by_name;
    for (const auto& [name, t] : c.model) {
      const auto it = specs.find(name);
      model_parts[name].push_back({it == specs.end() ? parallel::ShardSpec{} : it->second, t, s});
      if (std::find(model_order.begin(), model_order.end(), name) == model_order.end()) model_order.push_back(name);
      by_name[name] = t;
    }
    for (const auto& [key, t] : c.optimizer.tensors) {
      const size_t dot = key.find('.');
      size_t index = SIZE_MAX;  // a name without a number names nothing
      std::from_chars(key.data(), key.data() + std::min(dot, key.size()), index);
      if (index >= local_params.size() || !by_name.count(local_params[index])) {
        fail<IoError>("{}: optimizer buffer {} names no parameter of the shard", s, key);
      }
      const std::string& pname = local_params[index];
      const auto it = specs.find(pname);
      parallel::ShardSpec spec = it == specs.end() ? parallel::ShardSpec{} : it->second;
      // Buffers that are not shaped like the parameter's slice (counters) are replicated.
      if (t.shape() != by_name[pname].shape()) spec = parallel::ShardSpec{};
      optim_parts[pname + "/" + key.substr(dot + 1)].push_back({spec, t, s});
    }
  }
  const Checkpoint& base = loaded.front().ckpt;  // shard t0-p0's
  Checkpoint merged;
  merged.optimizer.scalars = base.optimizer.scalars;
  merged.step = base.step, merged.epoch = base.epoch, merged.batch = base.batch;
  merged.rng = base.rng, merged.config = base.config;
  for (const std::string& name : model_order) merged.model.emplace_back(name, assemble_slices(name, model_parts[name]));
  for (size_t i = 0; i < param_order.size(); ++i) {
    const std::string prefix = param_order[i] + "/";
    for (auto& [key, parts] : optim_parts) {
      if (key.rfind(prefix, 0) != 0) continue;
      merged.optimizer.tensors.emplace_back(std::to_string(i) + "." + key.substr(prefix.size()), assemble_slices(key, parts));
    }
  }
  if (merged.optimizer.scalars.is_object() && merged.optimizer.scalars.contains("num_params")) {
    merged.optimizer.scalars["num_params"] = param_order.size();  // the whole model's, not shard t0-p0's
  }
  merged.extra = {{"merged_from", shards}};
  if (const std::string id = run_id(base.extra); !id.empty()) merged.extra["run_id"] = id;
  return merged;
}

}  // namespace braid::train
