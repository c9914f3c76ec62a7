// StripedChannel: one ordered byte stream over K TCP connections to one peer,
// for links where one flow cannot fill the pipe (a per-flow window or cwnd
// limit on a long fat path; a NIC or switch that spreads flows, not packets,
// over queues, cores or paths).
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
// A thread may wait (wait_readable) while another reads and moves the reader
// on to the next sub-channel (StreamTransport's background reader waits while
// callers read for themselves): the reader then kicks the waiter through an
// eventfd, so it waits on the right socket instead of sleeping on the old one
// until its timeout.
// Failure: a sub-channel that throws shuts all of them down, so the peer sees
// the break on whichever sub-channel it is reading, not only on the broken one.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "braid/comm/transport/tcp_channel.h"

namespace braid::comm {

class StripedChannel final : public Channel {
 public:
  // 256 KiB: see bench/results/tcp_streams.txt. Smaller slices cost more
  // syscalls per byte; larger ones leave streams idle for messages under
  // K x slice, and outgrow the send buffer a connection starts with.
  static constexpr size_t kDefaultSlice = size_t{256} << 10;

  // Both ends must list the connections in the same order and use the same slice.
  explicit StripedChannel(std::vector<std::unique_ptr<TcpChannel>> subs, size_t slice_bytes = kDefaultSlice);

  size_t try_write(ConstBytes a, ConstBytes b) override;
  void write(ConstBytes a, ConstBytes b) override;
  size_t try_read(std::span<std::byte> out) override;
  bool wait_readable(std::chrono::milliseconds timeout) override;
  void close_write() override;
  void shutdown() override;

 private:
  // Runs op on sub-channel `sub`; if it throws, shuts all down and rethrows.
  template <class Op>
  auto on_sub(size_t sub, Op&& op);
  void next_read_sub();

  std::vector<std::unique_ptr<TcpChannel>> subs_;
  const size_t slice_;
  // Writer's position: the sub-channel of the next byte, bytes left in its slice.
  size_t write_sub_ = 0, write_left_;
  // Reader's position; read_sub_ is also read by a waiting thread.
  std::atomic<size_t> read_sub_{0};
  size_t read_left_;
  std::atomic<int> waiters_{0};
  net::Fd wake_;  // eventfd: the reader moved on while someone waited
};

}  // namespace braid::comm
