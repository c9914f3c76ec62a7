// What every collective algorithm sees: a Transport seen through one group of
// ranks (group index -> transport rank), one tag block for this collective, one
// deadline, and a reusable scratch area. Algorithms talk to group indices only.
//
// Tags: the communicator hands each collective a 64-bit tag base whose low 16
// bits are zero; an algorithm may use up to 2^16 "lanes" (tag = base | lane)
// where it needs messages between one pair that must not be matched in FIFO
// order with each other (two trees of a double binary tree, for instance).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/comm/reduce_op.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

// A wait inside a collective ran past its deadline; `peer` is the group index
// waited for. The communicator adds who never arrived before rethrowing.
class PeerTimeout : public TimeoutError {
 public:
  PeerTimeout(const std::string& what, int peer) : TimeoutError(what), peer(peer) {}
  int peer;
};

// A wait inside a collective gave up because a peer told this rank that it
// failed (Arrivals::notify_failure); `peer` is that rank's group index.
class PeerAborted : public PeerError {
 public:
  PeerAborted(const std::string& what, int peer) : PeerError(what), peer(peer) {}
  int peer;
};

// Grow-only byte buffer reused across collectives, so large scratch does not
// hit glibc's mmap/munmap path on every call (glibc's moving mmap threshold
// turns large, short-lived buffers into page faults; see tensor/allocator.h).
class Scratch {
 public:
  // At least `bytes` bytes; invalidates spans handed out earlier.
  std::span<std::byte> get(size_t bytes);

 private:
  std::vector<std::byte> buf_;
};

class Group {
 public:
  Group(Transport& transport, std::span<const int> members, int me, uint64_t tag_base,
        Deadline deadline, Scratch& scratch, Work collective);

  int rank() const { return me_; }
  int size() const { return static_cast<int>(members_.size()); }
  Deadline deadline() const { return deadline_; }
  Scratch& scratch() { return scratch_; }
  // "rank 0 allreduce #7 (1 MiB f32 sum, ring)": the collective, for error messages.
  const std::string& what() const { return collective_.what(); }
  // True when the communicator's worker thread runs the collective (nobody was
  // waiting for it yet), beside the program's own threads: its waits must not
  // hold a core long.
  bool on_worker() const { return on_worker_; }
  void set_on_worker(bool on) { on_worker_ = on; }
  // Waits also end, with PeerAborted, soon after `*flag` becomes true;
  // `describe` then says which peer failed and how ({peer index, message}).
  // Without a flag a wait ends only by completion or deadline.
  using DescribeAbort = std::function<std::pair<int, std::string>()>;
  void set_abort(const std::atomic<bool>* flag, DescribeAbort describe) {
    abort_ = flag;
    describe_abort_ = std::move(describe);
  }

  Work send(int peer, std::span<const std::byte> data, uint16_t lane = 0);
  Work recv(int peer, std::span<std::byte> data, uint16_t lane = 0);
  // Waits for `work` (a transfer with group index `peer`); throws PeerTimeout.
  void wait(const Work& work, int peer);
  // Exchanges with one peer: posts both, waits both.
  void sendrecv(int to, std::span<const std::byte> out, int from, std::span<std::byte> in,
                uint16_t lane = 0);

 private:
  Transport& transport_;
  std::span<const int> members_;
  int me_;
  uint64_t tag_base_;
  Deadline deadline_;
  Scratch& scratch_;
  Work collective_;  // names the collective in timeout messages (formatted only then)
  bool on_worker_ = false;
  const std::atomic<bool>* abort_ = nullptr;
  DescribeAbort describe_abort_;
};

// The elements and reduction of one reducing collective.
struct ReduceArgs {
  std::byte* data;     // count elements of dtype, in/out
  size_t count;        // elements
  DType dtype;
  Op op;
  size_t chunk_bytes;  // pipelining unit for ring/tree (bytes)
  size_t bytes() const { return count * itemsize(dtype); }
  std::byte* at(size_t element) const { return data + element * itemsize(dtype); }
};

// Near-equal split of `count` elements into `parts` parts; the first
// count % parts parts get one more element.
struct Partition {
  size_t count;
  size_t parts;
  size_t offset(size_t i) const { return i * (count / parts) + std::min(i, count % parts); }
  size_t size(size_t i) const { return offset(i + 1) - offset(i); }
};

// Largest power of two <= n (n >= 1).
int floor_pow2(int n);

}  // namespace braid::comm
