// shm: the Transport between processes of one host, through POSIX shared
// memory.
//
// Every pair of ranks shares one segment (shm_open + mmap) holding two
// single-producer/single-consumer byte rings, one per direction. Each ring is
// a Channel (channel.h) and StreamTransport does framing and matching, as for
// tcp. A message costs two memcpys (into the ring, out of it into the posted
// receive buffer) that overlap in time: the writer publishes every chunk as
// soon as it is copied. Large payloads skip the ring and cost one copy
// (pull_min below). A rank waiting for a message reads the ring itself
// (StreamTransport); otherwise a background reader spins briefly, then sleeps
// on a futex in the segment, so idle ranks use no CPU; a sleeping side also
// checks, every 100 ms, that the peer process is alive, so a dead peer
// becomes a PeerError naming its rank instead of a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "braid/comm/store/store.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

struct ShmOptions {
  int rank = 0;
  int size = 1;
  // Store key namespace (distinct per group and per restart).
  std::string prefix = "braid";
  // Bytes per ring (one per direction per pair); a power of two.
  size_t ring_bytes = size_t{4} << 20;
  // Spin iterations before a blocked writer sleeps on the futex (the
  // background reader spins a sixteenth of this).
  int spin = 20000;
  // Payloads of at least this many bytes are not copied through the ring:
  // the receiver reads them straight from the sender's buffer with
  // cross-memory attach (process_vm_readv), one copy instead of two, where
  // the ranks may read each other's memory (checked at start-up). 0: never.
  size_t pull_min = size_t{256} << 10;
  // Bound on what a peer's early messages may make us buffer (transport.h).
  size_t max_message = kDefaultMaxMessage;
  std::chrono::milliseconds connect_timeout{60000};
};

// Throws ConfigError when the ranks are not all on this host.
std::unique_ptr<Transport> make_shm_transport(Store& store, const ShmOptions& options);

}  // namespace braid::comm
