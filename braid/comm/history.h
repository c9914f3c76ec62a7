// A communicator's flight recorder (docs/reliability.md): a bounded history of
// its recent collectives, what a rank tells its peers when one of them fails,
// and what it dumps for `braid inspect history`.
//
// Recording costs a mutex and a few stores per state change (queued, started,
// done or failed); nothing is formatted until a message or a dump needs it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/reduce_op.h"
#include "braid/tensor/dtype.h"

namespace braid::comm {

// Two ranks called different collectives at one sequence number (or the same
// one with different sizes, dtypes or roots).
class DesyncError : public PeerError { using PeerError::PeerError; };
// A call on a communicator that failed before: it is refused at once, with
// the first failure's message.
class CommunicatorFailed : public PeerError { using PeerError::PeerError; };

enum class OpState : uint8_t { queued, started, done, failed };
std::string_view name(OpState s);

// A collective's call as the caller made it: what every rank must agree on.
// Raw fields (formatting a name costs more than a small collective).
struct OpInfo {
  const char* op = "";  // a string literal: "allreduce"
  uint64_t bytes = 0;
  std::optional<DType> dtype{};
  std::optional<Op> reduce{};
  int root = -1;                         // -1: the op has no root
  std::optional<Algorithm> algorithm{};  // as asked (automatic until the body picks)
};

// " f32 sum, root 2, ring": the call's arguments as timeout messages show them.
std::string describe_args(const OpInfo& info);
// "4 MiB", "4000 bytes".
std::string human_bytes(uint64_t b);

// One entry of a history, formatted: what a peer reports and a dump holds.
struct OpRecord {
  uint64_t seq = 0;  // 0: no such op
  std::string op;    // "allreduce"
  uint64_t bytes = 0;
  std::string args;  // describe_args without the algorithm: must match across ranks
  std::string algorithm;
  OpState state = OpState::queued;
  double queued = 0, started = 0, ended = 0;  // Unix seconds; 0: not yet
  std::string error;                           // failed ops

  bool empty() const { return seq == 0; }
  // Whether two ranks made the same call (op, bytes, dtype, reduction, root).
  bool same_call(const OpRecord& o) const { return op == o.op && bytes == o.bytes && args == o.args; }
  // "allreduce #17 (4 MiB f32 sum)"
  std::string name() const;
};
nlohmann::json to_json(const OpRecord& r);
OpRecord op_record_from_json(const nlohmann::json& j);

// Where one rank stands, relative to sequence number `asked`.
struct Position {
  OpRecord asked;      // its record of op #asked, if it has one
  OpRecord current;    // the last op it started (running, done or failed)
  OpRecord last_done;  // the last op it finished successfully
  uint64_t queued = 0; // the highest sequence number it has been called with
  // Known only from the rank's notice that it failed `current` (it did not
  // answer): what it finished before is unknown.
  bool from_notice = false;
};

class History {
 public:
  explicit History(size_t capacity = 64);

  void queued(uint64_t seq, const OpInfo& info);
  void started(uint64_t seq);
  // The algorithm the body chose (for Algorithm::automatic).
  void ran_with(uint64_t seq, Algorithm a);
  void done(uint64_t seq);
  void failed(uint64_t seq, std::string error);

  Position position(uint64_t asked) const;
  // Oldest first.
  std::vector<OpRecord> records() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    uint64_t seq = 0;
    OpInfo info;
    std::optional<Algorithm> ran;
    OpState state = OpState::queued;
    Clock::time_point queued{}, started{}, ended{};
    std::string error;
  };
  // Entry of `seq`, or null once evicted (mu_ held).
  const Entry* find(uint64_t seq) const;
  Entry* find(uint64_t seq) { return const_cast<Entry*>(std::as_const(*this).find(seq)); }
  OpRecord format(const Entry& e) const;

  mutable std::mutex mu_;
  std::vector<Entry> ring_;  // seq % capacity
  uint64_t last_queued_ = 0, last_started_ = 0, last_done_ = 0;
  // Unix time of the steady clock's epoch, so dumps of different ranks line up.
  double unix_offset_;
};

}  // namespace braid::comm
