// Who never arrived: the facts a collective timeout must report (docs/design.md,
// "Every wait has a deadline").
//
// Every rank records the sequence number of the last collective it started.
// A listener (one posted receive per peer, re-posted from its completion
// callback, so it answers even while the worker thread is stuck in a
// collective) replies to queries with that record. When a collective times
// out, the rank queries all others for a short window and names the ranks that
// have not reached the collective (and the ones that did not answer at all).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

class Arrivals {
 public:
  // members: group rank -> transport rank. query_tag/reply_tag: two tags no
  // other message of the group uses.
  Arrivals(const std::shared_ptr<Transport>& transport, std::vector<int> members, int rank,
           uint64_t query_tag, uint64_t reply_tag);
  ~Arrivals();  // stops answering; posted receives stay with the transport

  // The worker began collective `seq` (named `op`).
  void started(uint64_t seq, std::string_view op);
  // "ranks that never arrived at #7: 3 (last started #6 allreduce), 5 (no answer)"
  // or "every rank arrived at #7". Waits up to `window`.
  std::string who_never_arrived(uint64_t seq, Duration window);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace braid::comm
