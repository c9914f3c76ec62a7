// Communicator: a group of ranks over a Transport (docs/design.md, "comm").
//
// Every collective is asynchronous: it is numbered (per-communicator sequence
// number, encoded into its tags), queued on the communicator (collectives run
// in call order, one at a time, on a thread of the progress engine shared by
// every communicator split from the same root: comm/engine.h), and returns a
// Work. All ranks must call the
// same collectives in the same order. Buffers must stay valid until the Work
// completes. A collective that runs past its timeout completes its Work with a
// TimeoutError naming rank, peer, op, bytes, sequence number and where every
// other rank stood; ranks that called different collectives get a
// DesyncError naming both calls (comm/history.h, comm/explain.h). A
// communicator that failed stays failed: later collectives fail at once with
// CommunicatorFailed carrying the first failure's message, and the history of
// recent collectives is dumped to CommOptions::history_dir.
// Destroying the last copy of a communicator lets its queued collectives
// finish (or time out) first.
//
//   Communicator comm(transport);
//   comm.allreduce(grads, {.op = Op::avg, .algorithm = Algorithm::ring, .timeout = 30s})
//       .wait(Deadline::after(60s));
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/cost_model.h"
#include "braid/comm/reduce_op.h"
#include "braid/comm/transport/transport.h"
#include "braid/comm/work.h"
#include "braid/tensor/device.h"
#include "braid/tensor/dtype.h"

namespace braid::comm {

using namespace std::chrono_literals;

// An untyped view of `count` elements of `dtype`, in host memory or on a
// device. Collectives on device buffers go to the device's own library
// (NCCL for CUDA: braid/cuda/nccl.h), registered as DeviceCollectives.
struct BufferRef {
  std::byte* data = nullptr;
  size_t count = 0;  // elements
  DType dtype = DType::f32;
  Device device = Device::cpu;

  BufferRef() = default;
  BufferRef(void* d, size_t n, DType t, Device dev = Device::cpu)
      : data(static_cast<std::byte*>(d)), count(n), dtype(t), device(dev) {}
  template <class T>
  BufferRef(std::span<T> s) : BufferRef(const_cast<std::remove_const_t<T>*>(s.data()), s.size(), dtype_of<std::remove_const_t<T>>()) {}
  template <class T>
  BufferRef(std::vector<T>& v) : BufferRef(std::span<T>(v)) {}
  template <class T>
  BufferRef(const std::vector<T>& v) : BufferRef(std::span<const T>(v)) {}
  size_t bytes() const { return count * itemsize(dtype); }
};

struct CommOptions {
  // Default per-collective timeout (from when the collective starts on this rank).
  Duration timeout = 300s;
  // Pipelining unit of ring and tree algorithms, bytes.
  size_t chunk_bytes = 256 * 1024;
  // Host this rank runs on (hierarchical all-reduce groups ranks by it);
  // empty: gethostname().
  std::string host{};
  // Link costs for the chooser; empty: default_link_cost(transport name) until
  // calibrate() measures them. `inter` is used between hosts.
  std::optional<LinkCost> cost{};
  std::optional<LinkCost> inter_host_cost{};
  // Recent collectives kept per communicator (comm/history.h).
  size_t history = 64;
  // Where the family's histories are written, as rank-<transport rank>.json,
  // when a collective fails or a peer asks after its own failure; empty: nowhere.
  std::string history_dir{};
};

// How long a caller waits for a collective it submitted with `timeout`, from
// when the collective may have started (it was submitted, or the one queued
// before it on the communicator ended). The collective fails by itself within
// `timeout` of starting, naming the peer and where every rank stood; a wait
// that ended at the same moment threw a bare "timed out waiting for rank 0
// allreduce #54" instead whenever the collective started after the wait did
// (a gradient bucket queued behind another). This is the backstop past it.
inline Duration collective_backstop(Duration timeout) { return timeout + std::chrono::seconds(1); }

struct AllreduceOptions {
  Op op = Op::sum;
  Algorithm algorithm = Algorithm::automatic;
  Duration timeout{};  // zero: CommOptions::timeout
  // Start at once on a progress-engine thread, for a collective meant to run
  // while the caller computes (a data-parallel bucket during backward), unless
  // it goes through shared memory (see Impl::memory_path). Otherwise it runs in
  // the first thread that waits for it, or on an engine thread within 10 ms if
  // nobody waits.
  bool background = false;
};
struct ReduceOptions {
  int root = 0;
  Op op = Op::sum;
  Duration timeout{};
};
struct ReduceScatterOptions {
  Op op = Op::sum;
  Duration timeout{};
};
struct RootOptions {  // broadcast, gather, scatter
  int root = 0;
  Duration timeout{};
};
struct TimeoutOptions {  // allgather, alltoall, barrier
  Duration timeout{};
};
struct P2POptions {
  uint64_t tag = 0;  // < 2^39
};

class Communicator;

// Collectives on device buffers, provided by a device backend and chosen by
// the communicator for any BufferRef whose device is not the host. Each call
// is collective over `comm`'s ranks, like the communicator's own.
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual Work allreduce(const Communicator& comm, BufferRef buf, Op op, Duration timeout) = 0;
  virtual Work broadcast(const Communicator& comm, BufferRef buf, int root, Duration timeout) = 0;
  virtual Work reduce_scatter(const Communicator& comm, BufferRef in, BufferRef out, Op op, Duration timeout) = 0;
  virtual Work allgather(const Communicator& comm, BufferRef in, BufferRef out, Duration timeout) = 0;
  virtual Work send(const Communicator& comm, BufferRef buf, int peer, Duration timeout) = 0;
  virtual Work recv(const Communicator& comm, BufferRef buf, int peer, Duration timeout) = 0;
};
// Installs the collectives for buffers on devices of `type` (process-wide).
void set_device_collectives(DeviceType type, DeviceCollectives* collectives);

class Communicator {
 public:
  // An empty communicator (valid() is false): what split() returns to ranks
  // that asked for no group (color < 0).
  Communicator() = default;
  explicit Communicator(std::shared_ptr<Transport> transport, CommOptions options = {});
  // Copies share the group, queue and sequence numbers.
  Communicator(const Communicator&) = default;
  Communicator& operator=(const Communicator&) = default;
  ~Communicator();

  bool valid() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  // Transport rank of group rank r.
  int transport_rank(int r) const;
  // This communicator's id in the transport's tag space (comm/tags.h): the
  // same on every member, and distinct among the communicators of one rank.
  uint32_t id() const;
  const CommOptions& options() const;

  // Collective: ranks with the same color >= 0 form a new communicator,
  // ordered by (key, rank); color < 0 gets an empty one. Blocks up to the timeout.
  Communicator split(int color, int key) const;
  // Collective: the ranks on this rank's host (CommOptions::host, else
  // gethostname()), ordered by rank. Blocks up to the timeout.
  Communicator split_by_host() const;

  // In place: buf is the input and receives the result on every rank.
  Work allreduce(BufferRef buf, AllreduceOptions o = {});
  // In place; the result is on o.root only (other ranks' buf is used as scratch).
  Work reduce(BufferRef buf, ReduceOptions o = {});
  Work broadcast(BufferRef buf, RootOptions o = {});
  // in: size() * out.count elements; out[i] = reduction of everyone's in block rank().
  Work reduce_scatter(BufferRef in, BufferRef out, ReduceScatterOptions o = {});
  // out: size() * in.count elements; block r = rank r's in.
  Work allgather(BufferRef in, BufferRef out, TimeoutOptions o = {});
  // Blocks of different sizes: rank r contributes counts[r] elements (every
  // rank passes the same counts; in.count == counts[rank()]); out holds
  // sum(counts) elements, rank r's block after those of ranks < r. Ring.
  Work allgatherv(BufferRef in, BufferRef out, std::vector<size_t> counts, TimeoutOptions o = {});
  // out (root only): size() * in.count elements.
  Work gather(BufferRef in, BufferRef out, RootOptions o = {});
  // in (root only): size() * out.count elements.
  Work scatter(BufferRef in, BufferRef out, RootOptions o = {});
  // in, out: size() blocks; block j of in goes to rank j's block rank().
  Work alltoall(BufferRef in, BufferRef out, TimeoutOptions o = {});
  // Blocks of different sizes (MPI's alltoallv): block j of `in`,
  // send_counts[j] elements, goes to rank j; block i of `out`, recv_counts[i]
  // elements, comes from rank i; blocks back to back in rank order. Each rank
  // passes its own counts, and recv_counts[i] must be rank i's
  // send_counts[rank()]: exchange the counts first (an alltoall of one count
  // per rank). Host buffers only.
  Work alltoallv(BufferRef in, BufferRef out, std::vector<size_t> send_counts, std::vector<size_t> recv_counts,
                 TimeoutOptions o = {});
  Work barrier(TimeoutOptions o = {});
  // Point-to-point, outside the collective ordering; matched by (peer, tag) FIFO.
  Work send(BufferRef buf, int peer, P2POptions o = {});
  Work recv(BufferRef buf, int peer, P2POptions o = {});

  // Collective: measures alpha and beta by a ping-pong between ranks 0 and 1
  // and shares rank 0's figures, so every rank's chooser agrees.
  Work calibrate(TimeoutOptions o = {});
  LinkCost link_cost() const;
  // The algorithm `allreduce` would use for `bytes` with Algorithm::automatic
  // (shared_memory once an all-reduce has set up the arena).
  Algorithm choose_allreduce(size_t bytes) const;

  struct Impl;

 private:
  explicit Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl& impl() const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace braid::comm
