// What the Store's server does with one decoded request (protocol.h): the
// key-value map and the rules of each op, apart from sockets and timers, so
// they can be tested and fuzzed with bytes alone (server.cc does the I/O).
//
// Everything here is bounded by the request's own size except the map, which
// grows with kSet/kAdd/kCompareSet: it is capped at `max_bytes` (keys plus
// values), past which a write is answered with kError and the map is unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "braid/comm/store/protocol.h"

namespace braid::comm::store {

// The longest wait a kWait may ask for (about 35 years: "never").
inline constexpr int64_t kMaxWaitMs = int64_t{1} << 40;

struct KeyValues {
  std::unordered_map<std::string, std::string> map;
  uint64_t bytes = 0;                    // sum of key and value sizes in `map`
  uint64_t max_bytes = uint64_t{1} << 30;  // bound on `bytes`

  // The keys of `keys` that are not in the map, in order.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
};

// The server's answer to one request.
struct Outcome {
  enum class Kind {
    respond,  // send `status` and `fields`
    wait,     // kWait on keys still missing: `fields` are the keys; answer when they exist or after wait_ms
    reject,   // the request is malformed: log `why` and drop the connection
  };
  Kind kind = Kind::respond;
  Status status = Status::kOk;
  std::vector<std::string> fields{};
  int64_t wait_ms = 0;
  bool changed = false;  // the map changed: waiters may be released
  std::string why{};
};

// Applies `req` to `kv`.
Outcome apply(KeyValues& kv, const Decoded& req);

}  // namespace braid::comm::store
