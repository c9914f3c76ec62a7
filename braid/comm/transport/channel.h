// A Channel is a reliable, ordered byte pipe to one peer: a TCP socket
// (tcp.cc) or a pair of shared-memory rings (shm.cc). StreamTransport
// (stream.h) turns one Channel per peer into the tagged, matched messages of
// the Transport interface, so framing and matching are written once.
//
// Threads: one thread writes and one thread reads a Channel at a time (the
// reader may change from call to call: StreamTransport lets a thread that
// waits for a message read for itself). wait_readable() may run in another
// thread while one reads (StreamTransport's background reader waits while
// callers read for themselves), and shutdown() may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "braid/base/futex.h"

namespace braid::comm {

using ConstBytes = std::span<const std::byte>;

class Channel {
 public:
  virtual ~Channel() = default;
  // Writes as much of a..b (in order) as fits without blocking; returns the
  // bytes written. Throws PeerError when the peer is gone.
  virtual size_t try_write(ConstBytes a, ConstBytes b) = 0;
  // Writes all of a then b; blocks. Throws PeerError when the peer is gone or
  // the channel was shut down.
  virtual void write(ConstBytes a, ConstBytes b) = 0;
  // Copies up to out.size() bytes that have already arrived into `out`
  // without blocking; returns how many (0: none yet), or kClosed once the peer
  // closed its write side and every byte it sent has been read. Throws
  // PeerError on an error.
  static constexpr size_t kClosed = ~size_t{0};
  virtual size_t try_read(std::span<std::byte> out) = 0;
  // Blocks until try_read would return non-zero, or `timeout` passes (then
  // returns false). Throws PeerError when the peer died or the channel was
  // shut down.
  virtual bool wait_readable(std::chrono::milliseconds timeout) = 0;
  // Single-copy path for large payloads: the receiver copies them straight
  // out of the sender's memory (shm: cross-memory attach), and only a header
  // travels through the channel. Payloads of at least pull_min() bytes go
  // this way; 0: never.
  virtual size_t pull_min() const { return 0; }
  // Copies dst.size() bytes from address `remote` in the peer's memory.
  virtual void pull(std::span<std::byte> dst, uint64_t remote);
  // No more writes from us: the peer's try_read() then sees kClosed.
  virtual void close_write() = 0;
  // Unblocks wait_readable() and write() in other threads; they throw.
  virtual void shutdown() = 0;
};

}  // namespace braid::comm
