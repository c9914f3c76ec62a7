#include "braid/comm/transport/shm_ring.h"

#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "braid/base/copy_bytes.h"
#include "braid/base/error.h"

namespace braid::comm::shm {

namespace {

// Copies are published in pieces of at most this many bytes so the reader
// starts copying out while the writer is still copying in.
constexpr size_t kChunk = 128 << 10;

void signal(std::atomic<uint32_t>& seq, std::atomic<uint32_t>& sleeping) {
  // seq_cst pairs with the sleeper's increment of `sleeping` then re-check
  // (futex_sleep_until; Dekker): either it sees our update or we see it asleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_seq_cst)) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(seq);
  }
}

}  // namespace

RingChannel::RingChannel(std::shared_ptr<void> mapping, RingControl* out, RingControl* in,
                         size_t capacity, int spin, int peer_rank, pid_t peer_pid, size_t pull_min)
    : mapping_(std::move(mapping)),
      out_(out), in_(in), capacity_(capacity), spin_(spin), peer_rank_(peer_rank),
      peer_pid_(peer_pid), pull_min_(pull_min) {}

bool can_read_memory_of(pid_t peer, uint64_t remote, uint64_t expect) {
  uint64_t got = 0;
  iovec local{&got, sizeof got}, far{reinterpret_cast<void*>(remote), sizeof got};
  return ::process_vm_readv(peer, &local, 1, &far, 1, 0) == sizeof got && got == expect;
}

void RingChannel::pull(std::span<std::byte> dst, uint64_t remote) {
  size_t done = 0;
  while (done < dst.size()) {
    iovec local{dst.data() + done, dst.size() - done};
    iovec far{reinterpret_cast<void*>(remote + done), dst.size() - done};
    ssize_t n = ::process_vm_readv(peer_pid_, &local, 1, &far, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      fail<PeerError>("cannot read {} bytes from rank {} (pid {}): {}", dst.size() - done, peer_rank_,
                      peer_pid_, n < 0 ? std::strerror(errno) : "nothing read");
    }
    done += static_cast<size_t>(n);
  }
}

template <class Pred>
bool RingChannel::wait(Pred pred, std::atomic<uint32_t>& seq, std::atomic<uint32_t>& sleeping,
                       const char* what, int spin, std::chrono::milliseconds timeout) {
  // Spin (the peer usually answers within microseconds), yielding the core
  // every 64 rounds so an oversubscribed host still runs the peer; then sleep.
  for (int i = 0; i < spin; ++i) {
    if (pred()) return true;
    if ((i & 63) == 63) sched_yield();
    else cpu_relax();
  }
  return futex_sleep_until(seq, sleeping, pred, [&] {
    if (stop_.load()) fail<PeerError>("shared-memory channel to rank {} shut down", peer_rank_);
    if (::kill(peer_pid_, 0) != 0 && errno == ESRCH) {
      fail<PeerError>("rank {} (pid {}) died while we were {}", peer_rank_, peer_pid_, what);
    }
  }, std::chrono::steady_clock::now() + timeout, std::chrono::milliseconds(100));
}

size_t RingChannel::put(ConstBytes src, bool block) {
  size_t done = 0;
  uint64_t head = out_->head.load(std::memory_order_relaxed);
  while (done < src.size()) {
    uint64_t tail = out_->tail.load(std::memory_order_acquire);
    size_t free_bytes = capacity_ - static_cast<size_t>(head - tail);
    if (free_bytes == 0) {
      if (!block) return done;
      wait([&] { return out_->tail.load(std::memory_order_acquire) != tail; }, out_->space_seq,
           out_->producer_sleeping, "writing", spin_);
      continue;
    }
    size_t at = static_cast<size_t>(head % capacity_);
    size_t n = std::min({free_bytes, src.size() - done, capacity_ - at, kChunk});
    copy_bytes(data(out_) + at, src.data() + done, n);
    head += n;
    done += n;
    out_->head.store(head, std::memory_order_release);
    signal(out_->data_seq, out_->consumer_sleeping);
  }
  return done;
}

size_t RingChannel::try_write(ConstBytes a, ConstBytes b) {
  if (stop_.load()) fail<PeerError>("shared-memory channel to rank {} shut down", peer_rank_);
  // All or nothing for the header (a), so a partial write stays simple.
  uint64_t used = out_->head.load(std::memory_order_relaxed) - out_->tail.load(std::memory_order_acquire);
  if (capacity_ - used < a.size()) return 0;
  size_t n = put(a, false);
  return n + put(b, false);
}

void RingChannel::write(ConstBytes a, ConstBytes b) {
  put(a, true);
  put(b, true);
}

size_t RingChannel::try_read(std::span<std::byte> out) {
  uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  uint64_t head = in_->head.load(std::memory_order_acquire);
  if (head == tail) {
    if (stop_.load(std::memory_order_relaxed))
      fail<PeerError>("shared-memory channel to rank {} shut down", peer_rank_);
    // Re-read head after seeing `closed`: bytes published before the close count.
    if (in_->closed.load(std::memory_order_acquire) && in_->head.load(std::memory_order_acquire) == tail)
      return kClosed;
    return 0;
  }
  size_t n = std::min(static_cast<size_t>(head - tail), out.size());
  size_t at = static_cast<size_t>(tail % capacity_);
  size_t first = std::min(n, capacity_ - at);
  copy_bytes(out.data(), data(in_) + at, first);
  copy_bytes(out.data() + first, data(in_), n - first);
  in_->tail.store(tail + n, std::memory_order_release);
  signal(in_->space_seq, in_->producer_sleeping);
  return n;
}

// Spins less than a writer does: a thread that waits for a particular message
// polls for itself (StreamTransport::wait), so this wait is the background
// reader's and should leave the core to the program.
bool RingChannel::wait_readable(std::chrono::milliseconds timeout) {
  const uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  return wait([&] {
    return in_->head.load(std::memory_order_acquire) != tail || in_->closed.load(std::memory_order_acquire);
  }, in_->data_seq, in_->consumer_sleeping, "waiting for data", spin_ / 16, timeout);
}

void RingChannel::close_write() {
  out_->closed.store(1, std::memory_order_release);
  out_->data_seq.fetch_add(1);
  futex_wake(out_->data_seq);
}

void RingChannel::shutdown() {
  stop_.store(true);
  // Wake our own sleepers so they see stop_.
  in_->data_seq.fetch_add(1);
  futex_wake(in_->data_seq);
  out_->space_seq.fetch_add(1);
  futex_wake(out_->space_seq);
}

}  // namespace braid::comm::shm
