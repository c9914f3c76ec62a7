// StripedChannel: one ordered byte stream over K sub-channels (the K TCP
// connections of one peer), for links where one flow cannot fill the pipe
// (a per-flow window or cwnd limit on a long fat path; a NIC or switch that
// spreads flows, not packets, over queues, cores or paths).
//
// The stream is cut into fixed-size slices by byte offset: slice j (bytes
// [j*S, (j+1)*S)) travels on sub-channel j mod K. Writer and reader each count
// their offset, so the receiver knows where every byte comes from without
// any framing, and bytes still move straight between the caller's buffer and
// the socket (no staging copy). The price is one more syscall per slice
// boundary, hence slices far larger than a syscall's fixed cost.
//
// Order: the next byte of the stream can only come from the sub-channel of
// the reader's current slice, so reads and waits look at that one only.
// Failure: a sub-channel that throws shuts all of them down, so the peer sees
// the break on whichever sub-channel it is reading, not only on the broken one.
#pragma once

#include <memory>
#include <vector>

#include "braid/comm/transport/channel.h"

namespace braid::comm {

class StripedChannel final : public Channel {
 public:
  // 256 KiB: measured on loopback (bench/results/tcp_streams.txt), smaller
  // slices cost throughput (more syscalls), larger ones spread only messages
  // of K x slice and more over all K streams.
  static constexpr size_t kDefaultSlice = size_t{256} << 10;

  // Both ends must use the same sub-channel order and slice size.
  explicit StripedChannel(std::vector<std::unique_ptr<Channel>> subs, size_t slice_bytes = kDefaultSlice);

  size_t try_write(ConstBytes a, ConstBytes b) override;
  void write(ConstBytes a, ConstBytes b) override;
  size_t try_read(std::span<std::byte> out) override;
  bool wait_readable(std::chrono::milliseconds timeout) override;
  void close_write() override;
  void shutdown() override;

 private:
  // A position in the striped stream: the sub-channel that carries the next
  // byte and how many bytes of its slice are left.
  struct Cursor {
    size_t sub = 0;
    size_t left = 0;  // bytes, 1..slice
  };
  void advance(Cursor& c, size_t n) const;
  // Runs op on sub-channel `sub`; if it throws, shuts all down and rethrows.
  template <class Op>
  auto on_sub(size_t sub, Op&& op);

  std::vector<std::unique_ptr<Channel>> subs_;
  const size_t slice_;
  Cursor write_at_, read_at_;  // owned by the writing / the reading thread
};

}  // namespace braid::comm
