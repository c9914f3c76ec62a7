#include "braid/train/checkpoint_manifest.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "braid/base/atomic_file.h"
#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/base/safetensors.h"
#include "braid/train/checkpoint.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestFormat = "braid-sharded-checkpoint";
constexpr const char* kManifest = "manifest.json";
constexpr int64_t kManifestMaxElements = int64_t{1} << 40;  // of one tensor, read from a file
constexpr size_t kManifestMaxDims = 64;

// A shape read from a file: at most 64 dims >= 0 whose product fits 2^40.
Shape checked_shape(const nlohmann::json& j, const char* what) {
  Shape s;
  if (!j.is_array() || j.size() > kManifestMaxDims) throw std::invalid_argument(fmt::format("{} is not a shape", what));
  int64_t n = 1;
  for (const auto& d : j) {
    const int64_t v = json_integer<int64_t>(d);
    if (v < 0 || (v > 0 && n > kManifestMaxElements / v)) throw std::invalid_argument(fmt::format("{} is too large", what));
    n *= v;
    s.push_back(v);
  }
  return s;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// CRC-32 of the manifest's compact JSON without its own CRC.
uint32_t manifest_crc(nlohmann::json j) {
  j.erase("manifest_crc32");
  const std::string text = j.dump();
  return crc32(as_bytes(text));
}

// "<dir>/ckpt-00001200" -> 1200 for a folder of that form.
std::optional<int64_t> folder_step(const fs::path& p) {
  const std::string n = p.filename().string();
  if (n.size() != 13 || !n.starts_with("ckpt-")) return std::nullopt;
  if (!std::all_of(n.begin() + 5, n.end(), ::isdigit)) return std::nullopt;
  return std::stoll(n.substr(5));
}

nlohmann::json piece_json(const Piece& p) {
  return {{"tensor", p.tensor}, {"dtype", p.dtype}, {"slice_shape", p.slice_shape},
          {"spec", {{"dim", p.spec.dim}, {"full_shape", p.spec.full_shape}, {"offset", p.spec.offset},
                    {"blocks", p.spec.blocks}}},
          {"begin", p.begin}, {"end", p.end}, {"file", p.file}, {"offset", p.offset}, {"bytes", p.bytes},
          {"crc32", p.crc32}};
}

Piece piece_from_json(const nlohmann::json& j) {
  Piece p;
  p.tensor = j.at("tensor").get<std::string>();
  p.dtype = j.at("dtype").get<std::string>();
  p.slice_shape = checked_shape(j.at("slice_shape"), "slice_shape");
  const nlohmann::json& s = j.at("spec");
  p.spec = {.dim = json_integer<int>(s.at("dim")), .full_shape = checked_shape(s.at("full_shape"), "spec.full_shape"),
            .offset = json_integer<int64_t>(s.at("offset")), .blocks = json_integer<int>(s.at("blocks"))};
  p.begin = json_integer<int64_t>(j.at("begin"));
  p.end = json_integer<int64_t>(j.at("end"));
  p.file = j.at("file").get<std::string>();
  p.offset = json_integer<int64_t>(j.at("offset"));
  p.bytes = json_integer<int64_t>(j.at("bytes"));
  p.crc32 = json_integer<uint32_t>(j.at("crc32"));
  // What the readers rely on: a run inside its slice, bytes that are its
  // elements', a slice inside its whole, and a file in the step's folder.
  const size_t item = safetensors::dtype_size(p.dtype);
  int rank = -1;
  char tail = 0;
  if (item == 0) throw std::invalid_argument("piece of " + p.tensor + ": unknown dtype " + p.dtype);
  if (p.begin < 0 || p.begin > p.end || p.end > shape_numel(p.slice_shape) || p.offset < 0 ||
      p.bytes != (p.end - p.begin) * static_cast<int64_t>(item)) {
    throw std::invalid_argument(fmt::format("piece of {}: run [{}, {}) of {} bytes does not fit its slice {}", p.tensor,
                                            p.begin, p.end, p.bytes, to_string(p.slice_shape)));
  }
  if (p.spec.dim >= 0 && (p.spec.dim >= static_cast<int>(p.slice_shape.size()) || p.spec.blocks < 1 ||
                          p.spec.full_shape.size() != p.slice_shape.size() || p.spec.offset < 0)) {
    throw std::invalid_argument("piece of " + p.tensor + ": its slice spec does not fit its shape");
  }
  if (std::sscanf(p.file.c_str(), "rank-%d.safetensor%c", &rank, &tail) != 2 || tail != 's' || rank < 0 ||
      p.file != rank_data_file(rank)) {
    throw std::invalid_argument("piece of " + p.tensor + ": file \"" + p.file + "\" is not a rank's data file");
  }
  return p;
}

std::string manifest_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Shape whole_shape(const Piece& p) { return p.spec.dim >= 0 ? p.spec.full_shape : p.slice_shape; }

std::string rank_data_file(int rank) { return fmt::format("rank-{:05d}.safetensors", rank); }
std::string rank_index_file(int rank) { return fmt::format("rank-{:05d}.json", rank); }

nlohmann::json to_json(const RankIndex& x) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const Piece& p : x.pieces) pieces.push_back(piece_json(p));
  return {{"rank", x.rank}, {"session", x.session}, {"step", x.step}, {"shard", x.shard}, {"data_rank", x.data_rank},
          {"params", x.params}, {"state", x.state},
          {"rng", {{"seed", x.rng.seed}, {"stream", x.rng.stream}, {"offset", x.rng.offset}}}, {"pieces", pieces}};
}

RankIndex rank_index_from_json(const nlohmann::json& j, const std::string& path) {
  try {
    RankIndex x;
    x.rank = json_integer<int>(j.at("rank"));
    x.session = j.at("session").get<std::string>();
    x.step = json_integer<int64_t>(j.at("step"));
    x.shard = j.at("shard").get<std::string>();
    x.data_rank = json_integer<int>(j.at("data_rank"));
    x.params = j.at("params").get<std::vector<std::string>>();
    x.state = j.at("state").get<std::vector<std::string>>();
    const nlohmann::json& r = j.at("rng");
    x.rng = {json_integer<uint64_t>(r.at("seed")), json_integer<uint64_t>(r.at("stream")),
             json_integer<uint64_t>(r.at("offset"))};
    for (const nlohmann::json& p : j.at("pieces")) x.pieces.push_back(piece_from_json(p));
    return x;
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: malformed rank index: {}", path, e.what());
  } catch (const std::invalid_argument& e) {
    fail<IoError>("{}: malformed rank index: {}", path, e.what());
  }
}

void write_manifest(const std::string& dir, const Manifest& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankIndex& r : m.ranks) ranks.push_back(to_json(r));
  // A trainer without a config (a library user's) has null there.
  auto object = [](const nlohmann::json& j) { return j.is_null() ? nlohmann::json::object() : j; };
  nlohmann::json j = {{"format", kManifestFormat}, {"version", 1}, {"step", m.step}, {"epoch", m.epoch}, {"batch", m.batch},
                      {"world", m.world}, {"session", m.session}, {"layout", m.layout},
                      {"optimizer", object(m.optimizer)}, {"config", object(m.config)}, {"extra", object(m.extra)},
                      {"ranks", ranks}};
  j["manifest_crc32"] = manifest_crc(j);
  write_file_atomic((fs::path(checkpoint_stem(dir, m.step)) / kManifest).string(), j.dump() + "\n");
}

Manifest read_manifest(const std::string& dir, int64_t step) {
  const std::string path = (fs::path(checkpoint_stem(dir, step)) / kManifest).string();
  if (!fs::exists(path)) fail<IoError>("{}: no manifest (a save cut short, not a checkpoint)", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(manifest_text(path));
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: not JSON: {}", path, e.what());
  }
  Manifest m;
  try {
    if (!j.is_object() || j.value("format", "") != kManifestFormat) fail<IoError>("{}: not a braid sharded manifest", path);
    const uint32_t want = json_integer<uint32_t>(j.at("manifest_crc32"));
    if (const uint32_t got = manifest_crc(j); got != want)
      fail<IoError>("{}: does not match its own crc32 ({:08x}, recorded {:08x}): altered", path, got, want);
    m.step = json_integer<int64_t>(j.at("step"));
    m.epoch = json_integer<int64_t>(j.at("epoch"));
    m.batch = json_integer<int64_t>(j.at("batch"));
    m.world = json_integer<int>(j.at("world"));
    m.session = j.at("session").get<std::string>();
    m.layout = j.at("layout").get<std::string>();
    m.optimizer = j.at("optimizer");
    m.config = j.at("config");
    m.extra = j.at("extra");
    if (!m.optimizer.is_object() || !m.config.is_object() || !m.extra.is_object())
      fail<IoError>("{}: optimizer, config and extra must be objects", path);
    for (const nlohmann::json& r : j.at("ranks")) m.ranks.push_back(rank_index_from_json(r, path));
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: malformed manifest: {}", path, e.what());
  }
  if (m.step != step) fail<IoError>("{}: says step {} but its folder says {}: renamed or altered", path, m.step, step);
  if (m.world < 1 || static_cast<int>(m.ranks.size()) != m.world)
    fail<IoError>("{}: names {} ranks' shards for a world of {}", path, m.ranks.size(), m.world);
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    if (m.ranks[r].rank != static_cast<int>(r) || m.ranks[r].step != step)
      fail<IoError>("{}: entry {} is rank {}'s shard of step {}", path, r, m.ranks[r].rank, m.ranks[r].step);
  }
  return m;
}

std::vector<int64_t> sharded_folders(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory()) continue;
    if (const auto s = folder_step(e.path())) steps.push_back(*s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<int64_t> sharded_steps(const std::string& dir) {
  std::vector<int64_t> out;
  for (int64_t s : sharded_folders(dir)) {
    if (fs::exists(fs::path(checkpoint_stem(dir, s)) / kManifest)) out.push_back(s);
  }
  return out;
}

void prune_sharded(const std::string& dir, int keep) {
  if (keep < 1) fail<ValueError>("prune_sharded: keep must be >= 1, got {}", keep);
  const std::vector<int64_t> complete = sharded_steps(dir);
  if (complete.empty()) return;
  const std::set<int64_t> kept(complete.end() - std::min<ptrdiff_t>(keep, static_cast<ptrdiff_t>(complete.size())),
                               complete.end());
  for (int64_t s : sharded_folders(dir)) {
    if (s >= complete.back() || kept.count(s)) continue;
    const fs::path folder = checkpoint_stem(dir, s);
    std::error_code ec;
    fs::remove(folder / kManifest, ec);  // the commit record first: never a half-deleted checkpoint that looks whole
    fs::remove_all(folder, ec);
  }
}

std::vector<std::string> whole_order(const Manifest& m, bool state) {
  // Ranks by (tensor rank, stage) of their shard, so stage 0's names come first.
  std::vector<const RankIndex*> ranks;
  for (const RankIndex& r : m.ranks) ranks.push_back(&r);
  auto coords = [](const std::string& shard) {
    int t = 0, p = 0;
    if (shard.empty()) return std::pair(0, 0);
    if (std::sscanf(shard.c_str(), "t%d-p%d", &t, &p) != 2) return std::pair(INT_MAX, INT_MAX);
    return std::pair(t, p);
  };
  std::stable_sort(ranks.begin(), ranks.end(),
                   [&](const RankIndex* a, const RankIndex* b) { return coords(a->shard) < coords(b->shard); });
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const RankIndex* r : ranks) {
    for (const std::string& n : state ? r->state : r->params) {
      if (seen.insert(n).second) order.push_back(n);
    }
  }
  return order;
}

}  // namespace braid::train
