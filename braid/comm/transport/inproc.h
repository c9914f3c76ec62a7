// inproc: ranks as threads of one process, so distributed code is tested in
// one process first, over many world sizes (docs/design.md, "Tested against
// independent references").
//
// An InprocWorld owns the matching state for N ranks; each rank gets its own
// Transport from it. Messages are matched per (src, dst, tag) in posting order.
// Matching is rendezvous: a send completes when a receive has taken its bytes,
// which costs exactly one memcpy (sender's span -> receiver's span) and no
// staging buffer. Because no send is ever buffered, an algorithm that would
// deadlock on a transport with finite buffering (tcp, shm) deadlocks here too,
// which is what a test transport should do.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/comm/transport/transport.h"

namespace braid::comm {

class InprocWorld : public std::enable_shared_from_this<InprocWorld> {
 public:
  // A world of `size` ranks (>= 1).
  static std::shared_ptr<InprocWorld> create(int size);
  ~InprocWorld();

  int size() const;
  // The transport of `rank`; it keeps the world alive.
  std::unique_ptr<Transport> transport(int rank);
  // All transports, rank order.
  std::vector<std::unique_ptr<Transport>> transports();

  // Fails every pending operation with PeerError and every later one at once:
  // lets a test tear the world down while ranks still wait.
  void shutdown(const std::string& reason);

  struct State;

 private:
  explicit InprocWorld(int size);
  std::unique_ptr<State> state_;
  friend class InprocTransport;
};

}  // namespace braid::comm
