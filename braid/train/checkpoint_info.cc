#include "braid/train/checkpoint_info.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/parallel/shard_spec.h"
#include "braid/train/checkpoint_manifest.h"
#include "braid/train/checkpoint_sharded.h"
#include "braid/train/checkpoint_shards.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

int64_t bytes_of(const nn::NamedTensors& tensors) {
  int64_t n = 0;
  for (const auto& [name, t] : tensors) n += static_cast<int64_t>(t.nbytes());
  return n;
}

// An axis's degree in a mesh text "data <D> x tensor <T> x pipeline <P>"
// (parallel::Mesh); 0 when the text does not name it.
int64_t degree_in(const std::string& mesh, const char* axis) {
  const std::string key = std::string(axis) + " ";
  const auto at = mesh.find(key);
  long long n = 0;
  if (at == std::string::npos || std::sscanf(mesh.c_str() + at + key.size(), "%lld", &n) != 1) return 0;
  return n;
}

// Replicas on the data axis: ZeRO records them; otherwise the mesh text, or a
// configured degree.
int64_t data_world(const Checkpoint& c, const std::string& mesh) {
  if (const auto z = c.extra.find("zero"); z != c.extra.end() && z->contains("data_world")) {
    return json_integer<int64_t>(z->at("data_world"));
  }
  if (const int64_t n = degree_in(mesh, "data"); n > 0) return n;
  return std::max<int64_t>(0, c.config.value("parallel", nlohmann::json::object()).value("data", int64_t{0}));
}

// Fills everything but `step`, `sharded` and `problem` from the step's files,
// shard t0-p0 (or the whole checkpoint) first.
void summarise(StepSummary& s, const std::vector<ShardCheckpoint>& parts) {
  const Checkpoint& base = parts.front().ckpt;
  s.epoch = base.epoch, s.batch = base.batch;
  s.optimizer = base.optimizer.scalars.value("name", std::string());
  s.optimizer_steps = base.optimizer.scalars.value("steps", int64_t{0});
  s.run_id = base.extra.value("run_id", std::string());
  s.zero_stage = base.extra.value("zero", nlohmann::json::object()).value("stage", 0);
  std::map<std::string, int64_t> whole;  // model tensor -> its whole element count
  for (const auto& [folder, stem, c] : parts) {
    const nlohmann::json shard = c.extra.value("shard", nlohmann::json::object());
    const parallel::ShardSpecs specs = parallel::shard_specs_from_json(shard.value("specs", nlohmann::json::object()));
    ShardSummary& out = s.shards.emplace_back();
    out = {.name = folder, .file = stem + ".safetensors", .mesh = shard.value("mesh", std::string()),
           .model_bytes = bytes_of(c.model), .optimizer_bytes = bytes_of(c.optimizer.tensors)};
    for (const auto& [name, t] : c.model) {
      out.elements += t.numel();
      const auto it = specs.find(name);
      whole[name] = it != specs.end() && it->second.dim >= 0 ? numel(it->second.full_shape) : t.numel();
    }
  }
  for (const auto& [name, n] : whole) s.model_elements += n;
  // The trainer appends the writing rank's coordinates after ';'.
  s.mesh = s.shards.front().mesh.substr(0, s.shards.front().mesh.find(';'));
  s.data_world = data_world(base, s.mesh);
}

StepSummary describe_step(const std::string& dir, int64_t step, bool sharded) {
  StepSummary s{.step = step, .sharded = sharded};
  try {
    if (sharded) {
      summarise(s, load_shard_checkpoints(dir, step));
    } else {
      const std::string stem = checkpoint_stem(dir, step);
      summarise(s, {{"", stem, load_checkpoint(stem)}});
    }
  } catch (const IoError& e) {
    s = {.step = step, .sharded = sharded, .problem = e.what()};
  } catch (const nlohmann::json::exception& e) {  // a sidecar field of the wrong type
    s = {.step = step, .sharded = sharded,
         .problem = fmt::format("a sidecar of step {} in {} is malformed: {}", step, dir, e.what())};
  }
  return s;
}

// A step of train.checkpoint_format = sharded: every piece of the whole model
// and optimizer read and CRC-checked (load_sharded_whole), one summary per rank.
StepSummary describe_rank_step(const std::string& dir, int64_t step) {
  StepSummary s{.step = step, .sharded = true};
  try {
    const Manifest m = read_manifest(dir, step);
    const Checkpoint whole = load_sharded_whole(dir, step);
    s.epoch = m.epoch, s.batch = m.batch;
    s.optimizer = m.optimizer.value("name", std::string());
    s.optimizer_steps = m.optimizer.value("steps", int64_t{0});
    s.run_id = m.extra.value("run_id", std::string());
    s.zero_stage = m.extra.value("zero", nlohmann::json::object()).value("stage", 0);
    s.mesh = m.layout.substr(0, m.layout.find(';'));
    s.data_world = data_world(whole, s.mesh);
    for (const auto& [name, t] : whole.model) s.model_elements += t.numel();
    for (const RankIndex& r : m.ranks) {
      ShardSummary& out = s.shards.emplace_back();
      out = {.name = rank_data_file(r.rank).substr(0, rank_data_file(r.rank).find('.')),
             .file = (fs::path(checkpoint_stem(dir, step)) / rank_data_file(r.rank)).string(),
             .mesh = r.shard.empty() ? "" : "shard " + r.shard + ", data rank " + std::to_string(r.data_rank)};
      for (const Piece& p : r.pieces) {
        if (p.tensor.starts_with("model/")) out.elements += p.end - p.begin, out.model_bytes += p.bytes;
        if (p.tensor.starts_with("optim/")) out.optimizer_bytes += p.bytes;
      }
    }
  } catch (const IoError& e) {
    s = {.step = step, .sharded = true, .problem = e.what()};
  }
  return s;
}

}  // namespace

CheckpointInfo describe_checkpoints(const std::string& dir, std::optional<int64_t> step) {
  if (!fs::is_directory(dir)) fail<IoError>("{} is not a folder", dir);
  CheckpointInfo info{.dir = dir, .shard_folders = shard_folders(dir), .whole_steps = list_checkpoints(dir)};
  std::map<int64_t, std::set<std::string>> holders;  // step -> shard folders that have it
  for (const std::string& s : info.shard_folders) {
    for (int64_t k : list_checkpoints(dir + "/" + s)) holders[k].insert(s);
  }
  for (const auto& [k, have] : holders) {
    if (!shards_of_step(dir, k).empty()) {
      info.shard_steps.push_back(k);
      continue;
    }
    // The grid of the run that wrote the step: its mesh as a holder recorded
    // it, else the span of the holders (runs under other layouts may share
    // the folder, so not every shard folder belongs to this step's grid).
    int tensor = 0, stages = 0;
    for (const std::string& s : have) {
      int t = 0, p = 0;
      if (std::sscanf(s.c_str(), "shard-t%d-p%d", &t, &p) == 2) tensor = std::max(tensor, t + 1), stages = std::max(stages, p + 1);
    }
    try {
      const nlohmann::json sidecar = read_checkpoint_sidecar(checkpoint_stem(dir + "/" + *have.begin(), k));
      const std::string mesh = sidecar.value("extra", nlohmann::json::object())
                                   .value("shard", nlohmann::json::object())
                                   .value("mesh", std::string());
      tensor = std::max(tensor, static_cast<int>(degree_in(mesh, "tensor")));
      stages = std::max(stages, static_cast<int>(degree_in(mesh, "pipeline")));
    } catch (const std::exception&) {
      // An unreadable or odd sidecar: the span of the holders is all there is.
    }
    for (int t = 0; t < tensor; ++t) {
      for (int p = 0; p < stages; ++p) {
        const std::string s = fmt::format("shard-t{}-p{}", t, p);
        if (!have.count(s)) info.incomplete[k].push_back(s);
      }
    }
  }
  const auto has = [](const std::vector<int64_t>& v, int64_t k) { return std::binary_search(v.begin(), v.end(), k); };
  info.rank_steps = sharded_steps(dir);
  std::set<int64_t> all(info.whole_steps.begin(), info.whole_steps.end());
  all.insert(info.shard_steps.begin(), info.shard_steps.end());
  all.insert(info.rank_steps.begin(), info.rank_steps.end());
  if (step && !all.count(*step)) fail<IoError>("{} holds no complete checkpoint of step {}", dir, *step);
  for (int64_t k : all) {
    if (step && k != *step) continue;
    if (has(info.whole_steps, k)) info.steps.push_back(describe_step(dir, k, false));
    if (has(info.shard_steps, k)) info.steps.push_back(describe_step(dir, k, true));
    if (has(info.rank_steps, k)) info.steps.push_back(describe_rank_step(dir, k));
  }
  return info;
}

nlohmann::json to_json(const CheckpointInfo& info) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepSummary& s : info.steps) {
    nlohmann::json j = {{"step", s.step}, {"sharded", s.sharded}};
    if (!s.problem.empty()) {
      j["problem"] = s.problem;
      steps.push_back(j);
      continue;
    }
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardSummary& h : s.shards) {
      shards.push_back({{"name", h.name}, {"file", h.file}, {"mesh", h.mesh}, {"elements", h.elements},
                        {"model_bytes", h.model_bytes}, {"optimizer_bytes", h.optimizer_bytes}});
    }
    j.update({{"epoch", s.epoch}, {"batch", s.batch}, {"mesh", s.mesh}, {"data_world", s.data_world},
              {"zero_stage", s.zero_stage}, {"optimizer", s.optimizer}, {"optimizer_steps", s.optimizer_steps},
              {"run_id", s.run_id}, {"model_elements", s.model_elements}, {"shards", shards}});
    steps.push_back(j);
  }
  nlohmann::json incomplete = nlohmann::json::object();
  for (const auto& [k, lacking] : info.incomplete) incomplete[std::to_string(k)] = lacking;
  return {{"dir", info.dir}, {"shard_folders", info.shard_folders}, {"whole_steps", info.whole_steps},
          {"shard_steps", info.shard_steps}, {"rank_steps", info.rank_steps}, {"incomplete", incomplete},
          {"steps", steps}};
}

Checkpoint load_whole_checkpoint(const std::string& dir, std::optional<int64_t> step) {
  const std::vector<int64_t> whole = list_checkpoints(dir);
  const std::vector<int64_t> per_rank = sharded_steps(dir);  // train.checkpoint_format = sharded
  if (!step) {
    const std::optional<int64_t> sharded = latest_common_shard_step(dir);
    if (whole.empty() && !sharded && per_rank.empty()) fail<IoError>("{} holds no complete checkpoint", dir);
    step = std::max({whole.empty() ? int64_t{-1} : whole.back(), sharded.value_or(-1),
                     per_rank.empty() ? int64_t{-1} : per_rank.back()});
  }
  if (std::binary_search(per_rank.begin(), per_rank.end(), *step)) return load_sharded_whole(dir, *step);
  if (std::binary_search(whole.begin(), whole.end(), *step)) return load_checkpoint(checkpoint_stem(dir, *step));
  if (shard_folders(dir).empty()) fail<IoError>("{} holds no checkpoint of step {}", dir, *step);
  return merge_shard_checkpoints(dir, *step, shard_param_order(dir, *step));
}

}  // namespace braid::train
