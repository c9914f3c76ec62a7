#include "braid/ps/shard.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "braid/base/error.h"
#include "braid/base/hash.h"
#include "braid/base/json_number.h"
#include "braid/base/rng.h"
#include "braid/base/safetensors.h"

namespace braid::ps {

namespace {

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

template <class T>
std::vector<T> values_of(const safetensors::TensorData& t, const std::string& path, const std::string& name) {
  if (t.data.size() % sizeof(T) != 0) fail<IoError>("ps checkpoint {}: tensor {} has a ragged size", path, name);
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Bytes a dense range or a row of `n` weights holds with `k` state floats per
// weight, saturating.
uint64_t weight_bytes(uint64_t n, uint64_t k) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(n, 4 * (1 + k), &out)) return std::numeric_limits<uint64_t>::max();
  return out;
}

// What a table (a map node and its bookkeeping) and a row (besides its
// weights: key, step count, slot entry) are charged against the bound, so
// that tables under ever new ids or rows of dim 1 are bounded too.
constexpr uint64_t kTableCost = 256;
constexpr uint64_t kRowCost = 64;

}  // namespace

Shard::Shard(const PsConfig& config, int64_t dense_size, uint64_t max_bytes)
    : config_(config), updater_(make_updater(config.updater)), max_bytes_(max_bytes) {
  if (dense_size < 0) fail<ValueError>("ps shard: {} dense values", dense_size);
  const auto k = static_cast<uint64_t>(updater_->state_per_weight());
  bytes_ = weight_bytes(static_cast<uint64_t>(dense_size), k);
  if (bytes_ > max_bytes_) {
    fail<ValueError>("ps shard: {} dense values with {} state values each take {} bytes, past the server's limit of "
                     "{} (ServerOptions::max_shard_bytes)", dense_size, k, bytes_, max_bytes_);
  }
  weights_.assign(static_cast<size_t>(dense_size), 0.0f);
  state_.assign(static_cast<size_t>(dense_size) * k, 0.0f);
}

void Shard::apply_dense(std::span<const float> grad, double lr) {
  if (grad.size() != weights_.size())
    fail<ValueError>("ps shard: gradient of {} values for a range of {}", grad.size(), weights_.size());
  ++version_;
  updater_->apply(weights_, grad, state_, lr, version_);
}

void Shard::define_table(int table, int64_t dim, double init_std) {
  if (dim < 1 || dim > kMaxTableDim) fail<ConfigError>("ps table {}: dim must be in [1, {}], got {}", table, kMaxTableDim, dim);
  if (!std::isfinite(init_std) || init_std < 0)
    fail<ConfigError>("ps table {}: init_std must be finite and >= 0, got {}", table, init_std);
  if (!tables_.contains(table) && bytes_ + kTableCost > max_bytes_)
    fail<ValueError>("ps table {}: defining it would take the shard past its {} bytes", table, max_bytes_);
  auto [it, fresh] = tables_.try_emplace(table);
  if (fresh) {
    bytes_ += kTableCost;
    it->second.dim = dim;
    it->second.init_std = init_std;
  } else if (it->second.dim != dim) {
    fail<ConfigError>("ps table {} is defined with dim {} but a worker asked for dim {}", table, it->second.dim, dim);
  }
}

const SparseTable& Shard::table(int table) const {
  auto it = tables_.find(table);
  if (it == tables_.end()) fail<IndexError>("ps: table {} is not defined", table);
  return it->second;
}

SparseTable& Shard::mutable_table(int table, const char* op) {
  auto it = tables_.find(table);
  if (it == tables_.end()) fail<IndexError>("ps {}: table {} is not defined (define_table first)", op, table);
  return it->second;
}

int64_t Shard::row_of(SparseTable& t, int table, uint64_t key) {
  if (auto it = t.slot.find(key); it != t.slot.end()) return it->second;
  const uint64_t cost = weight_bytes(static_cast<uint64_t>(t.dim), static_cast<uint64_t>(updater_->state_per_weight())) + kRowCost;
  if (bytes_ > max_bytes_ || cost > max_bytes_ - bytes_) {
    fail<ValueError>("ps table {}: a new row for key {} would take the shard past its {} bytes ({} rows held; "
                     "ServerOptions::max_shard_bytes)", table, key, max_bytes_, t.keys.size());
  }
  bytes_ += cost;
  auto [it, fresh] = t.slot.try_emplace(key, static_cast<int64_t>(t.keys.size()));
  if (fresh) {
    t.keys.push_back(key);
    Generator g(mix64(config_.seed ^ (static_cast<uint64_t>(table) << 48)), key);
    for (int64_t j = 0; j < t.dim; ++j) t.rows.push_back(static_cast<float>(g.normal() * t.init_std));
    t.state.resize(t.state.size() + static_cast<size_t>(t.dim * updater_->state_per_weight()), 0.0f);
    t.steps.push_back(0);
  }
  return it->second;
}

void Shard::read_rows(int table, std::span<const uint64_t> keys, std::span<float> out) {
  SparseTable& t = mutable_table(table, "pull");
  const auto d = static_cast<size_t>(t.dim);
  if (out.size() != keys.size() * d) fail<ValueError>("ps pull: {} values for {} keys of dim {}", out.size(), keys.size(), d);
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto r = static_cast<size_t>(row_of(t, table, keys[i]));
    std::copy_n(t.rows.begin() + static_cast<ptrdiff_t>(r * d), d, out.begin() + static_cast<ptrdiff_t>(i * d));
  }
}

void Shard::apply_rows(int table, std::span<const uint64_t> keys, std::span<const float> grad, double lr) {
  SparseTable& t = mutable_table(table, "push");
  const auto d = static_cast<size_t>(t.dim);
  const auto k = static_cast<size_t>(updater_->state_per_weight());
  if (grad.size() != keys.size() * d)
    fail<ValueError>("ps push: {} values for {} keys of dim {}", grad.size(), keys.size(), d);
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto r = static_cast<size_t>(row_of(t, table, keys[i]));
    updater_->apply(std::span<float>(t.rows).subspan(r * d, d), grad.subspan(i * d, d),
                    std::span<float>(t.state).subspan(r * d * k, d * k), lr, ++t.steps[r]);
  }
}

void Shard::save(const std::string& path, int64_t clock) const {
  std::map<std::string, safetensors::TensorRef> tensors;
  tensors["dense"] = {"F32", {dense_size()}, bytes_of(weights_)};
  tensors["dense.state"] = {"F32", {static_cast<int64_t>(state_.size())}, bytes_of(state_)};
  nlohmann::json tables = nlohmann::json::object();
  for (const auto& [id, t] : tables_) {
    const std::string p = "table." + std::to_string(id);
    const auto rows = static_cast<int64_t>(t.keys.size());
    tensors[p + ".keys"] = {"I64", {rows}, bytes_of(t.keys)};
    tensors[p + ".rows"] = {"F32", {rows, t.dim}, bytes_of(t.rows)};
    tensors[p + ".state"] = {"F32", {static_cast<int64_t>(t.state.size())}, bytes_of(t.state)};
    tensors[p + ".steps"] = {"I64", {rows}, bytes_of(t.steps)};
    tables[std::to_string(id)] = {{"dim", t.dim}, {"init_std", t.init_std}};
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  safetensors::write(path, tensors,
                     {{"braid.ps.version", std::to_string(version_)},
                      {"braid.ps.clock", std::to_string(clock)},
                      {"braid.ps.updater", config_.updater.name},
                      {"braid.ps.tables", tables.dump()}});
}

bool Shard::load(const std::string& path, int64_t* clock) {
  if (!std::filesystem::exists(path)) return false;
  ShardFile f = read_shard_file(path);
  const int64_t c = f.clock;
  restore(std::move(f), path);
  if (clock) *clock = c;
  return true;
}

void Shard::restore(ShardFile f, const std::string& source) {
  if (f.updater != config_.updater.name)
    fail<ConfigError>("ps checkpoint {} was written by updater {}, this job uses {}", source, f.updater,
                      config_.updater.name);
  if (f.weights.size() != weights_.size())
    fail<ConfigError>("ps checkpoint {} holds {} dense values; this job's shard has {} (a different model or server "
                      "count)", source, f.weights.size(), weights_.size());
  weights_ = std::move(f.weights);
  state_ = std::move(f.state);
  version_ = f.version;
  tables_ = std::move(f.tables);
  const auto k = static_cast<uint64_t>(updater_->state_per_weight());
  bytes_ = weight_bytes(weights_.size(), k);
  for (const auto& [id, t] : tables_) bytes_ += kTableCost + t.keys.size() * (weight_bytes(static_cast<uint64_t>(t.dim), k) + kRowCost);
}

std::string shard_checkpoint_path(const std::string& dir, int server, int servers) {
  return fmt::format("{}/server-{}-of-{}.safetensors", dir, server, servers);
}

ShardFile read_shard_file(const std::string& path) {
  const safetensors::File f = safetensors::read(path);  // IoError naming the file when torn or truncated
  auto tensor = [&](const std::string& name) -> const safetensors::TensorData& {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) fail<IoError>("ps checkpoint {} lacks tensor {}", path, name);
    return it->second;
  };
  auto meta = [&](const std::string& key) {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) fail<IoError>("ps checkpoint {} lacks metadata {}", path, key);
    return it->second;
  };
  auto floats = [&](const std::string& name) { return values_of<float>(tensor(name), path, name); };
  ShardFile out;
  out.updater = meta("braid.ps.updater");
  size_t k = 0;  // state floats per weight
  try {
    k = static_cast<size_t>(make_updater({.name = out.updater})->state_per_weight());
  } catch (const ConfigError& e) {
    fail<ConfigError>("ps checkpoint {}: {}", path, e.what());
  }
  out.weights = floats("dense");
  out.state = floats("dense.state");
  if (out.state.size() != out.weights.size() * k)
    fail<IoError>("ps checkpoint {}: dense.state has {} values, expected {}", path, out.state.size(),
                  out.weights.size() * k);
  // The metadata's numbers and JSON are checked like the tensors: a malformed
  // one is an IoError naming the file, not a parser's exception.
  const auto number = [&](const std::string& text, const std::string& what) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      fail<IoError>("ps checkpoint {}: {} is '{}', not an integer", path, what, text.substr(0, 64));
    return v;
  };
  nlohmann::json defs;
  try {
    defs = nlohmann::json::parse(meta("braid.ps.tables"));
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("ps checkpoint {}: braid.ps.tables is malformed: {}", path, e.what());
  }
  if (!defs.is_object()) fail<IoError>("ps checkpoint {}: braid.ps.tables is not a JSON object", path);
  for (auto it = defs.begin(); it != defs.end(); ++it) {
    const int64_t id = number(it.key(), "a table id");
    if (id < std::numeric_limits<int>::min() || id > std::numeric_limits<int>::max())
      fail<IoError>("ps checkpoint {}: table id {} is out of range", path, id);
    const std::string p = "table." + it.key();
    SparseTable t;
    try {
      t.dim = json_integer<int64_t>(it.value().at("dim"));
      t.init_std = it.value().at("init_std").get<double>();
    } catch (const nlohmann::json::exception& e) {
      fail<IoError>("ps checkpoint {}: table {} is malformed: {}", path, id, e.what());
    }
    if (t.dim < 1 || t.dim > kMaxTableDim) fail<IoError>("ps checkpoint {}: table {} has dim {}", path, id, t.dim);
    t.keys = values_of<uint64_t>(tensor(p + ".keys"), path, p + ".keys");
    t.rows = floats(p + ".rows");
    t.state = floats(p + ".state");
    t.steps = values_of<int64_t>(tensor(p + ".steps"), path, p + ".steps");
    const size_t n = t.keys.size(), d = static_cast<size_t>(t.dim);
    if (t.rows.size() != n * d || t.state.size() != n * d * k || t.steps.size() != n)
      fail<IoError>("ps checkpoint {}: table {} has inconsistent sizes", path, id);
    for (size_t r = 0; r < n; ++r) t.slot[t.keys[r]] = static_cast<int64_t>(r);
    out.tables[static_cast<int>(id)] = std::move(t);
  }
  out.version = number(meta("braid.ps.version"), "braid.ps.version");
  out.clock = number(meta("braid.ps.clock"), "braid.ps.clock");
  return out;
}

}  // namespace braid::ps
