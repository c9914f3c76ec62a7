// A Channel is a reliable, ordered byte pipe to one peer: a TCP socket
// (tcp.cc) or a pair of shared-memory rings (shm.cc). StreamTransport
// (stream.h) turns one Channel per peer into the tagged, matched messages of
// the Transport interface, so framing and matching are written once.
//
// Threads: one thread writes and one thread reads a Channel at a time;
// shutdown() may be called from any thread.
#pragma once

#include <cstddef>
#include <span>

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
  // Fills `out`; blocks. Returns false on a clean end of stream before the
  // first byte (peer closed its write side); throws PeerError on an error or
  // an end of stream inside the buffer.
  virtual bool read(std::span<std::byte> out) = 0;
  // No more writes from us: the peer's read() then sees the end of stream.
  virtual void close_write() = 0;
  // Unblocks read() and write() in other threads; they throw.
  virtual void shutdown() = 0;
};

}  // namespace braid::comm
