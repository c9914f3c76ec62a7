// One direction of a shared-memory pipe: a single-producer/single-consumer
// byte ring living in a shared mapping (shm.h explains the transport).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "braid/comm/transport/channel.h"

namespace braid::comm::shm {

// Control block at the start of each ring; the data follows it. Counters are
// monotonic byte counts (never wrap in practice: 2^64 bytes).
struct alignas(64) RingControl {
  alignas(64) std::atomic<uint64_t> head;          // bytes written by the producer
  alignas(64) std::atomic<uint64_t> tail;          // bytes consumed by the consumer
  alignas(64) std::atomic<uint32_t> data_seq;      // futex: bumped when data arrives
  std::atomic<uint32_t> consumer_sleeping;         // consumers asleep on data_seq
  alignas(64) std::atomic<uint32_t> space_seq;     // futex: bumped when space frees
  std::atomic<uint32_t> producer_sleeping;         // producers asleep on space_seq
  alignas(64) std::atomic<uint32_t> closed;        // producer hung up
  pid_t producer_pid;
  pid_t consumer_pid;
};

// Whether this process may read `peer`'s memory at `remote` (8 bytes that
// hold `expect`): cross-memory attach needs ptrace rights over the peer.
bool can_read_memory_of(pid_t peer, uint64_t remote, uint64_t expect);

// Bytes a ring of `capacity` data bytes takes in the segment.
constexpr size_t ring_footprint(size_t capacity) { return sizeof(RingControl) + capacity; }

// A Channel writing into `out` and reading from `in` (two rings of one
// segment, seen from one side). Does not own the mapping.
class RingChannel final : public Channel {
 public:
  // `mapping` keeps the shared segment mapped for as long as the channel lives.
  // pull_min: payloads this large or larger are pulled with cross-memory
  // attach (0: the peer's memory cannot be read, never).
  RingChannel(std::shared_ptr<void> mapping, RingControl* out, RingControl* in, size_t capacity,
              int spin, int peer_rank, pid_t peer_pid, size_t pull_min);
  size_t try_write(ConstBytes a, ConstBytes b) override;
  void write(ConstBytes a, ConstBytes b) override;
  size_t try_read(std::span<std::byte> out) override;
  bool wait_readable(std::chrono::milliseconds timeout) override;
  size_t pull_min() const override { return pull_min_; }
  void pull(std::span<std::byte> dst, uint64_t remote) override;
  void close_write() override;
  void shutdown() override;

 private:
  size_t put(ConstBytes src, bool block);
  std::byte* data(RingControl* r) const { return reinterpret_cast<std::byte*>(r + 1); }
  // Waits until pred() holds (true) or `timeout` passes (false); throws
  // PeerError on shutdown or a dead peer.
  template <class Pred>
  bool wait(Pred pred, std::atomic<uint32_t>& seq, std::atomic<uint32_t>& sleeping, const char* what,
            int spin, std::chrono::milliseconds timeout = std::chrono::hours(24 * 365));

  std::shared_ptr<void> mapping_;
  RingControl* out_;
  RingControl* in_;
  size_t capacity_;
  int spin_;
  int peer_rank_;
  pid_t peer_pid_;
  size_t pull_min_;
  std::atomic<bool> stop_{false};
};

}  // namespace braid::comm::shm
