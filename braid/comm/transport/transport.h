// Transport: the only thing collective algorithms see (docs/design.md, "comm").
//
// Point-to-point, tagged, asynchronous byte transfer between the ranks of one
// group. Messages between a (sender, receiver, tag) triple are matched in the
// order they were posted; a receive must name exactly the size that was sent
// (a mismatch completes the receive with PeerError). Buffers must stay valid
// until the returned Work completes. A transport that can move data in the
// thread that waits gives its Works a helper (Work::help_with), so waiting is
// also progress (stream transports read the peer's channel in the waiter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "braid/comm/work.h"

namespace braid::comm {

// Default bound (bytes) on what a stream transport (tcp, shm) buffers for one
// peer: messages that arrive before their receive is posted are copied into
// memory the transport allocates, so the peer's frame header, not the
// receiver, would decide the allocation. A message larger than this, or early
// messages from one peer adding up to more, fail the connection with a
// PeerError naming the peer. Messages whose receive is already posted go
// straight into its buffer and are not limited. Set per job with
// parallel.max_message_mib.
inline constexpr size_t kDefaultMaxMessage = size_t{1} << 30;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Registered name: "inproc", "tcp", "shm", "mpi", or a wrapper's.
  virtual std::string name() const = 0;

  virtual Work send(int peer, uint64_t tag, std::span<const std::byte> data) = 0;
  virtual Work recv(int peer, uint64_t tag, std::span<std::byte> data) = 0;
};

}  // namespace braid::comm
