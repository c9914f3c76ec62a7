#include "braid/ps/shard_reshard.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/ranges.h>

#include "braid/base/error.h"
#include "braid/base/safetensors.h"

namespace braid::ps {

namespace {

namespace fs = std::filesystem;

// A complete set of shard checkpoints written by `servers` servers.
struct OldSet {
  int servers = 0;
  int64_t min_clock = 0, min_version = 0;
};

// i and S' of a name server-<i>-of-<S'>.safetensors; false for any other (temp files, leading zeros).
bool parse_name(std::string_view name, int* i, int* servers) {
  const auto number = [](std::string_view t, int* out) {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
    return ec == std::errc() && end == t.data() + t.size() && *out >= 0 && std::to_string(*out) == t;
  };
  constexpr std::string_view head = "server-", mid = "-of-", tail = ".safetensors";
  if (!name.starts_with(head) || !name.ends_with(tail)) return false;
  name = name.substr(head.size(), name.size() - head.size() - tail.size());
  const size_t m = name.find(mid);
  return m != std::string_view::npos && number(name.substr(0, m), i) && number(name.substr(m + mid.size()), servers) &&
         *i < *servers;
}

// count S' -> the indices i of the files server-i-of-S'.safetensors in `dir`.
std::map<int, std::set<int>> shard_files(const std::string& dir) {
  std::map<int, std::set<int>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    int i = 0, s = 0;
    if (parse_name(e.path().filename().string(), &i, &s)) found[s].insert(i);
  }
  return found;
}

int64_t meta_int(const safetensors::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) fail<IoError>("ps checkpoint {} lacks metadata {}", path, key);
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    fail<IoError>("ps checkpoint {}: metadata {} = '{}' is not a number", path, key, it->second);
  }
}

// The newest complete set of any count (see the header), reading only headers.
std::optional<OldSet> pick_set(const std::string& dir, std::vector<std::string>* notes) {
  std::optional<OldSet> best;
  for (const auto& [count, have] : shard_files(dir)) {
    if (static_cast<int>(have.size()) < count) {
      // The first few missing names (a stray server-0-of-1000000 must not list a million).
      std::vector<std::string> missing;
      for (int i = 0; i < count && missing.size() < 8; ++i) {
        if (!have.count(i)) missing.push_back(fs::path(shard_checkpoint_path(dir, i, count)).filename().string());
      }
      const int more = count - static_cast<int>(have.size()) - static_cast<int>(missing.size());
      if (notes) {
        notes->push_back(fmt::format("ignoring the incomplete set server-*-of-{} in {}: missing {}{}", count, dir,
                                     fmt::join(missing, ", "), more > 0 ? fmt::format(" and {} more", more) : ""));
      }
      continue;
    }
    OldSet s{.servers = count, .min_clock = std::numeric_limits<int64_t>::max(),
             .min_version = std::numeric_limits<int64_t>::max()};
    for (int i = 0; i < count; ++i) {
      const std::string path = shard_checkpoint_path(dir, i, count);
      const safetensors::Metadata m = safetensors::read_metadata(path);
      s.min_clock = std::min(s.min_clock, meta_int(m, "braid.ps.clock", path));
      s.min_version = std::min(s.min_version, meta_int(m, "braid.ps.version", path));
    }
    const auto rank = [](const OldSet& o) { return std::tie(o.min_clock, o.min_version, o.servers); };
    if (!best || rank(s) > rank(*best)) best = s;
  }
  return best;
}

// Appends the rows of `old` (read from `path`) whose keys server `index` of `servers` owns to `out`.
void take_rows(const ShardFile& old, const std::string& path, int index, int servers, size_t k, ShardFile& out,
               std::map<int, std::string>& defined_in) {
  for (const auto& [id, t] : old.tables) {
    auto [it, fresh] = out.tables.try_emplace(id);
    SparseTable& dst = it->second;
    if (fresh) {
      dst.dim = t.dim;
      dst.init_std = t.init_std;
      defined_in[id] = path;
    } else if (dst.dim != t.dim) {
      fail<ConfigError>("ps checkpoint {}: table {} has dim {}, but in {} it has dim {}", path, id, t.dim,
                        defined_in[id], dst.dim);
    }
    const auto d = static_cast<size_t>(t.dim);
    for (size_t r = 0; r < t.keys.size(); ++r) {
      const uint64_t key = t.keys[r];
      if (server_of_key(key, servers) != index) continue;
      if (!dst.slot.try_emplace(key, static_cast<int64_t>(dst.keys.size())).second)
        fail<IoError>("ps checkpoint {}: table {} key {} is also in another file of the set", path, id, key);
      dst.keys.push_back(key);
      const auto at = [](const std::vector<float>& v, size_t i) { return v.begin() + static_cast<ptrdiff_t>(i); };
      dst.rows.insert(dst.rows.end(), at(t.rows, r * d), at(t.rows, (r + 1) * d));
      dst.state.insert(dst.state.end(), at(t.state, r * d * k), at(t.state, (r + 1) * d * k));
      dst.steps.push_back(t.steps[r]);
    }
  }
}

}  // namespace

std::optional<ReshardedShard> reshard_from_checkpoints(const std::string& dir, int index, const DenseLayout& layout,
                                                       const PsConfig& config, std::vector<std::string>* notes) {
  const std::optional<OldSet> set = pick_set(dir, notes);
  if (!set || set->servers == layout.servers()) return std::nullopt;  // none, or this count's own files are newest
  const int64_t begin = layout.begin(index), end = layout.end(index), n = end - begin;
  const auto k = static_cast<int64_t>(make_updater(config.updater)->state_per_weight());
  ShardFile merged{.updater = config.updater.name,
                   .version = std::numeric_limits<int64_t>::max(),
                   .clock = std::numeric_limits<int64_t>::max(),
                   .weights = std::vector<float>(static_cast<size_t>(n)),
                   .state = std::vector<float>(static_cast<size_t>(n * k)),
                   .tables = {}};
  std::map<int, std::string> defined_in;  // table -> the file that first defined it
  std::vector<int64_t> sizes;
  int64_t at = 0;  // where the old file's range starts in the whole dense vector
  // One old file in memory at a time.
  for (int j = 0; j < set->servers; ++j) {
    const std::string path = shard_checkpoint_path(dir, j, set->servers);
    const ShardFile old = read_shard_file(path);
    if (old.updater != config.updater.name)
      fail<ConfigError>("ps checkpoint {} was written by updater {}, this job uses {}", path, old.updater,
                        config.updater.name);
    merged.version = std::min(merged.version, old.version);
    merged.clock = std::min(merged.clock, old.clock);
    // The overlap of the old range [at, at + m) with ours, for the weights and each state slot
    // (state[slot * size + i], block-wise in either range).
    const auto m = static_cast<int64_t>(old.weights.size());
    for (int64_t i = std::max(at, begin); i < std::min(at + m, end); ++i) {
      merged.weights[static_cast<size_t>(i - begin)] = old.weights[static_cast<size_t>(i - at)];
      for (int64_t s = 0; s < k; ++s)
        merged.state[static_cast<size_t>(s * n + i - begin)] = old.state[static_cast<size_t>(s * m + i - at)];
    }
    at += m;
    sizes.push_back(m);
    take_rows(old, path, index, layout.servers(), static_cast<size_t>(k), merged, defined_in);
  }
  const std::string files = fmt::format("{}/server-*-of-{}.safetensors", dir, set->servers);
  if (at != layout.total())
    fail<ConfigError>("ps checkpoints {} hold {} dense values in all ({}); this job's model has {}: they were "
                      "written for a different model", files, at, fmt::join(sizes, " + "), layout.total());
  ReshardedShard out{.shard = std::make_unique<Shard>(config, n), .clock = merged.clock, .from_servers = set->servers};
  out.shard->restore(std::move(merged), files);
  return out;
}

}  // namespace braid::ps
