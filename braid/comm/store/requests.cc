#include "braid/comm/store/requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

namespace braid::comm::store {

namespace {

std::optional<int64_t> parse_i64(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

Outcome respond(Status status, std::vector<std::string> fields, bool changed = false) {
  return {.kind = Outcome::Kind::respond, .status = status, .fields = std::move(fields), .changed = changed};
}

Outcome error(std::string why) { return respond(Status::kError, {std::move(why)}); }

// Stores `value` under `key` unless the map would pass its bound; the answer
// to a refused write (nullopt: stored).
std::optional<Outcome> put(KeyValues& kv, const std::string& key, const std::string& value) {
  auto it = kv.map.find(key);
  const uint64_t old_size = it == kv.map.end() ? 0 : key.size() + it->second.size();
  const uint64_t new_size = key.size() + value.size();
  const uint64_t others = kv.bytes - old_size;
  if (new_size > kv.max_bytes || others > kv.max_bytes - new_size) {
    return error(fmt::format("store full: writing '{}' ({} bytes) would take the store past its {} bytes "
                             "({} in use)", key.substr(0, 64), new_size, kv.max_bytes, kv.bytes));
  }
  if (it == kv.map.end()) kv.map.emplace(key, value);
  else it->second = value;
  kv.bytes = others + new_size;
  return std::nullopt;
}

}  // namespace

std::vector<std::string> KeyValues::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!map.contains(k)) out.push_back(k);
  return out;
}

Outcome apply(KeyValues& kv, const Decoded& req) {
  const auto& f = req.fields;
  if (const size_t need = [&]() -> size_t {
        switch (static_cast<Op>(req.head)) {
          case Op::kSet: case Op::kAdd: return 2;
          case Op::kCompareSet: return 3;
          case Op::kGet: case Op::kDelete: case Op::kWait: return 1;
          case Op::kPing: return 0;
        }
        return 0;
      }();
      f.size() < need) {
    return {.kind = Outcome::Kind::reject, .why = fmt::format("op {} with {} fields, needs {}", req.head, f.size(), need)};
  }
  switch (static_cast<Op>(req.head)) {
    case Op::kSet:
      if (auto refused = put(kv, f[0], f[1])) return *refused;
      return respond(Status::kOk, {}, true);
    case Op::kGet: {
      auto it = kv.map.find(f[0]);
      if (it == kv.map.end()) return respond(Status::kNotFound, {});
      return respond(Status::kOk, {it->second});
    }
    case Op::kAdd: {
      const auto delta = parse_i64(f[1]);
      if (!delta) return error("add: delta is not an integer");
      int64_t current = 0;
      if (auto it = kv.map.find(f[0]); it != kv.map.end()) {
        const auto parsed = parse_i64(it->second);
        if (!parsed) return error(fmt::format("key '{}' is not a counter", f[0].substr(0, 64)));
        current = *parsed;
      }
      int64_t sum = 0;
      if (__builtin_add_overflow(current, *delta, &sum)) {
        return error(fmt::format("add: counter '{}' at {} plus {} overflows 64 bits", f[0].substr(0, 64), current,
                                 *delta));
      }
      std::string value = std::to_string(sum);
      if (auto refused = put(kv, f[0], value)) return *refused;
      return respond(Status::kOk, {std::move(value)}, true);
    }
    case Op::kCompareSet: {
      auto it = kv.map.find(f[0]);
      // A missing key matches an empty `expected` (the PyTorch store's rule).
      const bool match = it == kv.map.end() ? f[1].empty() : it->second == f[1];
      if (!match) return respond(Status::kOk, {it == kv.map.end() ? std::string() : it->second});
      if (auto refused = put(kv, f[0], f[2])) return *refused;
      return respond(Status::kOk, {f[2]}, true);
    }
    case Op::kDelete: {
      auto it = kv.map.find(f[0]);
      if (it == kv.map.end()) return respond(Status::kOk, {"0"});
      kv.bytes -= it->first.size() + it->second.size();
      kv.map.erase(it);
      return respond(Status::kOk, {"1"});
    }
    case Op::kPing:
      return respond(Status::kOk, {});
    case Op::kWait: {
      const auto ms = parse_i64(f[0]);
      if (!ms || *ms < 0) return error("wait: bad timeout");
      std::vector<std::string> keys(f.begin() + 1, f.end());
      if (kv.missing(keys).empty()) return respond(Status::kOk, {});
      // Clients wait "forever" as 2^40 ms; longer would overflow the timer's nanoseconds.
      return {.kind = Outcome::Kind::wait, .fields = std::move(keys), .wait_ms = std::min(*ms, kMaxWaitMs)};
    }
  }
  return {.kind = Outcome::Kind::reject, .why = fmt::format("unknown op {}", req.head)};
}

}  // namespace braid::comm::store
