#include "braid/sim/op_table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "braid/base/atomic_file.h"
#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/base/log.h"
#include "braid/base/median.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/nn/init.h"
#include "braid/tensor/cpu/autotune.h"

namespace braid::sim {

namespace {

using nlohmann::json;

// 2: eager steps are timed with the weights held (measure_eager_step); a
// version 1 table's step figures were taken in a regime training never sees.
constexpr int kVersion = 2;

// Calls that settle every online autotuner a call can reach: each key
// (a GEMM's or convolution's shape and thread count) tries each candidate
// kTuningTrials times, and the most candidates any tuner has is 10 (bf16
// convolution on several threads). Until then, timed calls would mix the
// losing candidates, up to 20x slower, into the median.
constexpr int kSettleCalls = cpu::kTuningTrials * 10;

// Dropout names its generator by address (ops/dropout.h): the cost does not
// depend on which generator draws, so entries are keyed and measured with 0
// (the calling thread's generator). Keys then carry across processes, and a
// measurement never follows the address of a generator that is gone.
op::Attrs costed(const op::Attrs& attrs) {
  if (!attrs.has("generator")) return attrs;
  op::Attrs a = attrs;
  a.set("generator", int64_t{0});
  return a;
}

// An operand of that shape and dtype: floating values from N(0, 1), integers
// zero (the one index, token and class id valid for any op), booleans false.
// Zero indices send every scatter-add to one element, which overstates those
// ops: max_pool2d_backward of the CNN measured 1.5-1.8 ms this way against
// 0.4-0.7 ms inside an eager step (2-core AMD EPYC VM, 2026-11).
Tensor operand(const op::TensorMeta& m, Generator& gen) {
  if (m.absent) return Tensor();
  if (!is_floating(m.dtype)) return Tensor::zeros(m.shape, m.dtype);
  Tensor t = Tensor::empty(m.shape, DType::f32);
  nn::init::normal_(t, 0, 1, gen);
  return m.dtype == DType::f32 ? t : t.to(m.dtype);
}

// Median seconds of one call (see OpTableOptions). Warm-up runs `warmup`
// calls and on until the autotuners settle (kSettleCalls), for at most twice
// max_seconds. In-place ops (optimizer updates, accumulate_, copy_) write
// their operands on every call: the operands are scratch.
double measure(const op::OpDef& op, const op::Attrs& attrs, std::span<const op::TensorMeta> metas, int threads,
               const OpTableOptions& o) {
  ThreadsScope scope(threads);
  Generator gen(1);
  std::vector<Tensor> inputs;
  for (const op::TensorMeta& m : metas) inputs.push_back(operand(m, gen));
  const auto warm = Clock::now();
  for (int i = 0; i < std::max(o.warmup, kSettleCalls) && seconds_since(warm) < 2 * o.max_seconds; ++i) {
    op::call(op, inputs, attrs);
  }
  std::vector<double> times;
  const auto start = Clock::now();
  const auto repeats = static_cast<size_t>(std::max(1, o.repeats));
  while (times.size() < repeats && (times.empty() || seconds_since(start) < o.max_seconds)) {
    const auto t0 = Clock::now();
    op::call(op, inputs, attrs);
    times.push_back(seconds_since(t0));
  }
  return upper_median(std::move(times));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "";
}

// The entries of the table at `path`; none when there is no file. A file
// that is not an op table, or not valid JSON, is ignored with a warning (a
// cache must never stop a run); so is each entry that is not a finite
// non-negative number of seconds.
std::map<std::string, double> read_entries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::map<std::string, double> entries;
  try {
    const json j = json::parse(in);
    if (!j.is_object() || !j.contains("version") || json_integer_if<int>(j["version"]) != kVersion ||
        !j.contains("entries") || !j["entries"].is_object()) {
      logging::warn("op table {}: not a version {} op table; ignoring it and measuring afresh", path, kVersion);
      return {};
    }
    size_t bad = 0;
    for (const auto& [key, value] : j["entries"].items()) {
      const double s = value.is_number() ? value.get<double>() : -1;
      if (std::isfinite(s) && s >= 0) {
        entries[key] = s;
      } else {
        ++bad;
      }
    }
    if (bad > 0) logging::warn("op table {}: ignored {} entries that are not finite non-negative seconds", path, bad);
  } catch (const json::exception& e) {
    logging::warn("op table {}: unreadable ({}); ignoring it and measuring afresh", path, e.what());
    return {};
  }
  return entries;
}

}  // namespace

std::string default_op_table_path() {
  if (const char* dir = std::getenv("BRAID_CACHE_DIR"); dir && *dir) return std::string(dir) + "/op_times.json";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/braid/op_times.json";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/braid/op_times.json";
  return "op_times.json";
}

OpTable::OpTable(OpTableOptions options) : options_(std::move(options)) {
  path_ = options_.path.empty() ? default_op_table_path() : options_.path;
  if (!options_.refresh) entries_ = read_entries(path_);
}

std::string OpTable::key(const op::OpDef& op, const op::Attrs& attrs, std::span<const op::TensorMeta> inputs,
                         int threads) {
  std::string k = op.name + "|" + costed(attrs).to_string() + "|";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) k += ";";
    const op::TensorMeta& m = inputs[i];
    if (m.absent) {
      k += "-";
      continue;
    }
    k += std::string(name(m.dtype)) + "[";
    for (size_t d = 0; d < m.shape.size(); ++d) k += (d > 0 ? "," : "") + std::to_string(m.shape[d]);
    k += "]";
  }
  return k + "|t" + std::to_string(threads);
}

double OpTable::seconds(const op::OpDef& op, const op::Attrs& attrs, std::span<const op::TensorMeta> inputs,
                        int threads) {
  const std::string k = key(op, attrs, inputs, threads);
  if (auto it = entries_.find(k); it != entries_.end()) return it->second;
  if (op.effect == op::Effect::io) {
    fail<ValueError>("op table: {} talks to another rank; its time is the network's, which synthetic operands "
                     "cannot measure", op.name);
  }
  const double s = measure(op, costed(attrs), inputs, threads, options_);
  entries_.emplace(k, s);
  ++measured_;
  return s;
}

double OpTable::figure(const std::string& key, const std::function<double()>& measure, bool again) {
  if (auto it = entries_.find(key); it != entries_.end() && !again) return it->second;
  const double s = measure();
  entries_[key] = s;
  ++measured_;
  return s;
}

void OpTable::save() const {
  if (measured_ == 0) return;
  const json j{{"version", kVersion},
               {"machine", {{"cpu", cpu_model()}, {"cores", available_cores()}}},
               {"entries", entries_}};
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail<IoError>("op table: cannot create {}: {}", parent.string(), ec.message());
  write_file_atomic(path_, j.dump(1));
}

}  // namespace braid::sim
