// The measured cost of every op braid runs, by (op, attributes, operand
// shapes and dtypes, threads): the lookup table a simulated step reads its
// compute times from (docs/sim.md, "Op table").
//
// A missing entry is measured on the spot: the op runs through op::call on
// operands of those shapes (floating values drawn at random, integer operands
// zero so every index is valid) after warm-up calls that let the kernel
// autotuner settle, and the entry is the median of the timed calls. The table
// is a JSON file, written atomically, read once and extended as entries are
// measured; `refresh` measures everything again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "braid/ops/registry.h"

namespace braid::sim {

struct OpTableOptions {
  std::string path{};     // empty: default_op_table_path()
  bool refresh = false;   // ignore what the file holds
  int warmup = 3;         // untimed calls before timing
  int repeats = 5;        // timed calls; the median is kept
  double max_seconds = 0.5;  // stop timing an entry after this much (at least one timed call)
};

// $BRAID_CACHE_DIR/op_times.json, else $XDG_CACHE_HOME/braid/op_times.json,
// else ~/.cache/braid/op_times.json.
std::string default_op_table_path();

class OpTable {
 public:
  explicit OpTable(OpTableOptions options = {});

  // Seconds one call takes with these operands on `threads` intra-op threads;
  // measured first if the table lacks it. `outputs` are the call's outputs'
  // metas (for ops whose kernel writes into a given output; may be empty).
  double seconds(const op::OpDef& op, const op::Attrs& attrs, std::span<const op::TensorMeta> inputs, int threads);

  // Any other measured figure kept beside the ops (a model's whole eager
  // step): the stored value under `key`, else (or with `again`) measure()
  // stored there.
  double figure(const std::string& key, const std::function<double()>& measure, bool again = false);

  // Writes the table if anything was measured since it was read.
  void save() const;
  // The key an entry is stored under: "matmul|transpose_b=1|f32[64,784];f32[256,784]|t2".
  static std::string key(const op::OpDef& op, const op::Attrs& attrs, std::span<const op::TensorMeta> inputs,
                         int threads);
  size_t size() const { return entries_.size(); }
  size_t measured() const { return measured_; }  // entries measured by this object
  const std::string& path() const { return path_; }

 private:
  OpTableOptions options_;
  std::string path_;
  std::map<std::string, double> entries_;
  size_t measured_ = 0;
};

}  // namespace braid::sim
