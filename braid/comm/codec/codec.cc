#include "braid/comm/codec/codec.h"

#include <chrono>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::comm::codec {

using Clock = std::chrono::steady_clock;

nlohmann::json CodecOptions::to_json() const {
  return {{"name", name}, {"qsgd_levels", qsgd_levels}, {"qsgd_chunk", qsgd_chunk}, {"onebit_chunk", onebit_chunk},
          {"topk_ratio", topk_ratio}, {"powersgd_rank", powersgd_rank}, {"powersgd_min_rate", powersgd_min_rate},
          {"powersgd_epsilon", powersgd_epsilon}, {"warmup_steps", warmup_steps}, {"min_elements", min_elements},
          {"error_feedback", error_feedback}, {"seed", seed}};
}

CodecOptions CodecOptions::from_json(const nlohmann::json& j) {
  CodecOptions o;
  if (!j.is_object()) return o;
  o.name = j.value("name", o.name);
  o.qsgd_levels = json_integer_or(j, "qsgd_levels", o.qsgd_levels);
  o.qsgd_chunk = json_integer_or(j, "qsgd_chunk", o.qsgd_chunk);
  o.onebit_chunk = json_integer_or(j, "onebit_chunk", o.onebit_chunk);
  o.topk_ratio = j.value("topk_ratio", o.topk_ratio);
  o.powersgd_rank = json_integer_or(j, "powersgd_rank", o.powersgd_rank);
  o.powersgd_min_rate = j.value("powersgd_min_rate", o.powersgd_min_rate);
  o.powersgd_epsilon = j.value("powersgd_epsilon", o.powersgd_epsilon);
  o.warmup_steps = json_integer_or(j, "warmup_steps", o.warmup_steps);
  o.min_elements = json_integer_or(j, "min_elements", o.min_elements);
  o.error_feedback = j.value("error_feedback", o.error_feedback);
  o.seed = json_integer_or(j, "seed", o.seed);
  return o;
}

void CodecOptions::validate() const {
  // 2^24 levels: a level and its sign still fit pack_bits's 25-bit fields.
  if (qsgd_levels < 1 || qsgd_levels > (1 << 24)) fail<ConfigError>("codec.qsgd_levels must be in [1, 2^24], got {}", qsgd_levels);
  if (qsgd_chunk < 1) fail<ConfigError>("codec.qsgd_chunk must be >= 1, got {}", qsgd_chunk);
  if (onebit_chunk < 1) fail<ConfigError>("codec.onebit_chunk must be >= 1, got {}", onebit_chunk);
  if (!(topk_ratio > 0 && topk_ratio <= 1)) fail<ConfigError>("codec.topk_ratio must be in (0, 1], got {}", topk_ratio);
  if (powersgd_rank < 1) fail<ConfigError>("codec.powersgd_rank must be >= 1, got {}", powersgd_rank);
  if (powersgd_min_rate < 0) fail<ConfigError>("codec.powersgd_min_rate must be >= 0, got {}", powersgd_min_rate);
  if (powersgd_epsilon < 0) fail<ConfigError>("codec.powersgd_epsilon must be >= 0, got {}", powersgd_epsilon);
  if (warmup_steps < 0) fail<ConfigError>("codec.warmup_steps must be >= 0, got {}", warmup_steps);
  if (min_elements < 0) fail<ConfigError>("codec.min_elements must be >= 0, got {}", min_elements);
}

std::vector<float>& BucketState::tensor(const std::string& name, size_t n) {
  std::vector<float>& t = tensors[name];
  if (t.size() != n) t.assign(n, 0.0f);
  return t;
}

void CodecStats::add(const CodecStats& o) {
  raw_bytes += o.raw_bytes;
  wire_bytes += o.wire_bytes;
  encode_s += o.encode_s;
  decode_s += o.decode_s;
  calls += o.calls;
}

nlohmann::json CodecStats::to_json() const {
  return {{"raw_bytes", raw_bytes}, {"wire_bytes", wire_bytes},
          {"ratio", wire_bytes ? static_cast<double>(raw_bytes) / static_cast<double>(wire_bytes) : 0.0},
          {"encode_ms", encode_s * 1e3}, {"decode_ms", decode_s * 1e3}, {"calls", calls}};
}

void Codec::wait(const Work& w, const Communicator& comm, const char* what, const BucketState& state,
                 const AverageOptions& o) const {
  try {
    w.wait(Deadline::after(o.timeout));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {}: codec {} {} (bucket call {}) did not finish: {}", comm.rank(), o_.name, what,
                       state.steps, e.what());
  }
}

void Codec::average(Communicator& comm, std::span<float> grad, std::span<const Matrix> layout, BucketState& state,
                    const AverageOptions& o, CodecStats& stats) {
  if (plain(state, grad.size())) {
    wait(comm.allreduce(grad, {.op = Op::avg, .timeout = o.timeout}), comm, "plain all-reduce", state, o);
    stats.raw_bytes += grad.size_bytes();
    stats.wire_bytes += grad.size_bytes();
    stats.calls++;
  } else {
    combine(comm, grad, layout, state, o, stats);
  }
  state.steps++;
}

void Codec::combine(Communicator& comm, std::span<float> grad, std::span<const Matrix> layout, BucketState& state,
                    const AverageOptions& o, CodecStats& stats) {
  const auto t0 = Clock::now();
  std::vector<std::byte> mine;
  encode(grad, layout, state, mine);
  const auto t1 = Clock::now();
  // Message sizes first (they may differ: top-k drops zeros), then the messages.
  std::vector<int64_t> sizes(static_cast<size_t>(comm.size()));
  const int64_t own = static_cast<int64_t>(mine.size());
  wait(comm.allgather(std::span<const int64_t>(&own, 1), sizes, {.timeout = o.timeout}), comm,
       "allgather of message sizes", state, o);
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<std::byte> all(total);
  wait(comm.allgatherv(BufferRef(mine.data(), mine.size(), DType::u8), BufferRef(all.data(), all.size(), DType::u8),
                       counts, {.timeout = o.timeout}),
       comm, "allgatherv of messages", state, o);
  const auto t2 = Clock::now();
  std::fill(grad.begin(), grad.end(), 0.0f);
  size_t at = 0;
  for (size_t c : counts) {
    decode_add(std::span<const std::byte>(all).subspan(at, c), layout, grad);
    at += c;
  }
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (float& v : grad) v *= inv;
  const auto t3 = Clock::now();
  stats.raw_bytes += grad.size_bytes();
  stats.wire_bytes += mine.size();
  stats.encode_s += std::chrono::duration<double>(t1 - t0).count();
  stats.decode_s += std::chrono::duration<double>(t3 - t2).count();
  stats.calls++;
}

std::unique_ptr<Codec> make_codec(const CodecOptions& o) {
  o.validate();
  if (o.name == "none") return nullptr;
  if (o.name == "fp16") return make_cast_codec(o, DType::f16);
  if (o.name == "bf16") return make_cast_codec(o, DType::bf16);
  if (o.name == "qsgd") return make_qsgd_codec(o);
  if (o.name == "onebit") return make_onebit_codec(o);
  if (o.name == "topk") return make_topk_codec(o);
  if (o.name == "powersgd") return make_powersgd_codec(o);
  fail<ConfigError>("parallel.codec: unknown codec '{}' (none, fp16, bf16, qsgd, onebit, topk, powersgd)", o.name);
}

}  // namespace braid::comm::codec
