// What one server owns: its range of the dense weights and its rows of every
// sparse table, each with the updater state beside it, plus checkpointing of
// the lot. Not thread-safe: the server serializes access.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "braid/ps/config.h"
#include "braid/ps/updater.h"

namespace braid::ps {

// The widest sparse-table row a worker may define (values): far past any
// embedding, and small enough that a request's keys times dim cannot overflow.
inline constexpr int64_t kMaxTableDim = int64_t{1} << 20;

struct SparseTable {
  int64_t dim = 0;
  double init_std = 0;
  std::unordered_map<uint64_t, int64_t> slot;  // key -> row
  std::vector<uint64_t> keys;                  // row -> key
  std::vector<float> rows;                     // [rows, dim]
  std::vector<float> state;                    // [rows, state_per_weight * dim]
  std::vector<int64_t> steps;                  // updates per row
};

// What a shard checkpoint holds, as Shard::save writes it.
struct ShardFile {
  std::string updater;             // the updater's name
  int64_t version = 0, clock = 0;  // dense updates applied; the server's clock
  std::vector<float> weights;      // this server's dense range
  std::vector<float> state;        // [state_per_weight, weights], block-wise
  std::map<int, SparseTable> tables;
};

// Where server `server` of `servers` keeps its shard: <dir>/server-<i>-of-<S>.safetensors.
std::string shard_checkpoint_path(const std::string& dir, int server, int servers);

// Reads and checks a shard checkpoint: IoError naming `path` when it is torn,
// truncated (the CRC) or its sizes disagree; ConfigError for an unknown updater.
ShardFile read_shard_file(const std::string& path);

class Shard {
 public:
  // ValueError when the dense range alone (with its updater state) would
  // take more than `max_bytes`; new sparse rows past it are refused too.
  Shard(const PsConfig& config, int64_t dense_size, uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

  std::span<float> weights() { return weights_; }
  int64_t dense_size() const { return static_cast<int64_t>(weights_.size()); }
  // Dense updates applied so far.
  int64_t version() const { return version_; }
  void apply_dense(std::span<const float> grad, double lr);

  // Defining a table again with the same shape is a no-op; another shape is a ConfigError.
  void define_table(int table, int64_t dim, double init_std);
  bool has_table(int table) const { return tables_.count(table) > 0; }
  const SparseTable& table(int table) const;
  // Rows are created on first touch, drawn from N(0, init_std) by (seed, table, key),
  // so a row's initial value does not depend on which server holds it.
  void read_rows(int table, std::span<const uint64_t> keys, std::span<float> out);
  void apply_rows(int table, std::span<const uint64_t> keys, std::span<const float> grad, double lr);

  // Atomic (temp file + rename). `clock` is stored alongside.
  void save(const std::string& path, int64_t clock) const;
  // Replaces the contents with the checkpoint's; false when there is no file,
  // ConfigError when it was written for a different model or updater.
  bool load(const std::string& path, int64_t* clock);
  // Replaces the contents with `f`'s; ConfigError naming `source` when they
  // were written for a different model or updater.
  void restore(ShardFile f, const std::string& source);

  // Bytes held (weights, rows, updater state) and their bound; a restored
  // shard may hold more, and then refuses new rows.
  uint64_t bytes() const { return bytes_; }
  void set_max_bytes(uint64_t max_bytes) { max_bytes_ = max_bytes; }

 private:
  int64_t row_of(SparseTable& t, int table, uint64_t key);
  SparseTable& mutable_table(int table, const char* op);

  PsConfig config_;
  std::unique_ptr<Updater> updater_;
  std::vector<float> weights_, state_;
  int64_t version_ = 0;
  std::map<int, SparseTable> tables_;
  uint64_t bytes_ = 0, max_bytes_;
};

}  // namespace braid::ps
