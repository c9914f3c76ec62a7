// The side channel a failing collective asks its peers through (docs/design.md,
// "Every wait has a deadline"; docs/reliability.md).
//
// Every rank keeps a listener per peer (a posted receive, re-posted from its
// completion callback, so it answers even while the thread running the
// communicator's queue is stuck in a collective) for two kinds of message:
//   - a query "where are you relative to #S?", answered with the rank's
//     Position from its History (its record of #S, the op it is in, the last
//     op it finished, the highest op it was called with);
//   - a notice "I failed #S", which the failed rank sends to all its peers so
//     they stop waiting for it at once instead of running into their timeouts.
// The messages use two p2p tags of the communicator (kMaxUserTag + 0..2), not
// its collective tags, so they still flow when collectives are mismatched.
// Messages are fixed-size JSON, zero-padded: a receive names its size.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/comm/history.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

class Arrivals {
 public:
  struct Options {
    uint64_t query_tag, reply_tag, notice_tag;  // three tags no other message of the group uses
    // Called (on a transport thread) when a peer asks where this rank is:
    // some collective has failed, so the communicator dumps its history.
    std::function<void()> on_query{};
  };
  // members: group rank -> transport rank.
  Arrivals(const std::shared_ptr<Transport>& transport, std::vector<int> members, int rank,
           std::shared_ptr<const History> history, Options options);
  ~Arrivals();  // stops answering; posted receives stay with the transport

  // Every peer's Position relative to `seq` (this rank's own included);
  // nullopt for a peer that neither answered within `window` nor sent a
  // notice. Blocks at most `window`.
  std::vector<std::optional<Position>> survey(uint64_t seq, Duration window);
  // Tells every peer that this rank failed `failed` (best effort: sends are not waited for).
  void notify_failure(const OpRecord& failed);
  // The first failure a peer has notified (null if none): the peer's group
  // rank and its record. Read by waits that poll for it (Group).
  struct Notice {
    int peer;
    OpRecord op;
  };
  std::shared_ptr<const Notice> peer_failure() const;
  // Set once a peer has notified a failure; cheap to poll.
  const std::atomic<bool>& peer_failed() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace braid::comm
