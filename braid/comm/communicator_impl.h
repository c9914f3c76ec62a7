// Communicator internals shared by communicator.cc (public calls, worker) and
// communicator_split.cc (split, host discovery, hierarchical all-reduce).
//
// Tag layout (64 bits), so communicators sharing a transport never match each
// other's messages:
//   bit 63      0 = collective, 1 = point-to-point / diagnostics
//   bits 62..40 communicator id (23 bits; root 1, children hashed from parent id
//               and split index)
//   collective: bits 39..16 sequence number (mod 2^24), bits 15..0 lane
//   p2p:        bits 39..0 user tag (< 2^39); 2^39 + {0, 1}: arrival queries/replies
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "braid/comm/arrivals.h"
#include "braid/comm/communicator.h"
#include "braid/comm/shared_arena.h"

namespace braid::comm {

inline constexpr uint64_t kP2PBit = 1ull << 63;
inline constexpr uint64_t kMaxUserTag = 1ull << 39;
inline constexpr uint32_t kIdMask = (1u << 23) - 1;
// Lanes inside one collective reserved for host discovery and split.
inline constexpr uint16_t kHostLane = 0xff00, kSplitLane = 0xff01;

inline uint64_t collective_tag(uint32_t id, uint64_t seq) {
  return (static_cast<uint64_t>(id & kIdMask) << 40) | ((seq & 0xffffff) << 16);
}
inline uint64_t p2p_tag(uint32_t id, uint64_t user) {
  return kP2PBit | (static_cast<uint64_t>(id & kIdMask) << 40) | user;
}

struct Communicator::Impl : std::enable_shared_from_this<Communicator::Impl> {
  Impl(std::shared_ptr<Transport> transport, CommOptions options, std::vector<int> members, int rank,
       uint32_t id);
  ~Impl();

  // Queues `body` on the worker as collective `op` moving `bytes`; the Work
  // completes when body returns or throws. `detail` (", root 2") is formatted
  // only if a message needs it: a small collective takes less time than
  // formatting its name.
  Work submit(const char* op, Work::Describe detail, size_t bytes, Duration timeout,
              std::function<void(Group&)> body, bool background = false);
  Duration timeout_or_default(Duration t) const { return t.count() > 0 ? t : options.timeout; }

  // Worker-side helpers (communicator_split.cc).
  Communicator split_now(Group& g, int color, int key);
  void discover_hosts(Group& g);
  void hierarchical_allreduce(Group& g, const ReduceArgs& a);
  std::atomic<int> hosts{0};  // distinct hosts in the group; 0 until discovered (set by the worker)
  Communicator local, leaders;

  // The shared-memory arena (shared_arena.h), set up by the first collective
  // that wants it; null when the ranks cannot share memory (worker only).
  SharedArena* arena(Group& g);
  // Whether `automatic` may pick shared_memory: the group is known to be on
  // one host (shm and inproc transports, a hierarchical all-reduce's host
  // group). Over tcp or mpi on one host braid keeps to the named transport
  // unless the caller names shared_memory.
  bool arena_by_default = false;
  // Whether an all-reduce with `a` will go through the arena. Such a
  // collective is memory copies on every rank's own cores: started early on
  // the worker it competes with the computation it was meant to overlap (two
  // ranks on two cores trained the MLP 6-34 % slower that way), so
  // `background` is not honoured for it. (Network transfers, by contrast, need
  // little CPU and gain from starting early.)
  bool memory_path(Algorithm a) const {
    return a == Algorithm::shared_memory || (a == Algorithm::automatic && arena_by_default && hosts.load() <= 1);
  }
  std::unique_ptr<SharedArena> arena_;
  bool arena_tried_ = false;
  // Whether the last look at the arena found it usable (read by
  // automatic_allreduce, which other threads call through choose_allreduce).
  std::atomic<bool> arena_usable_{false};
  // What Algorithm::automatic means for an all-reduce of `bytes`: the arena
  // when the group is on one host and it is up, else the cost model's pick.
  Algorithm automatic_allreduce(size_t bytes) const;

  std::shared_ptr<Transport> transport;
  CommOptions options;
  std::vector<int> members;  // group rank -> transport rank
  int rank;
  uint32_t id;
  int splits = 0;  // split() calls so far (worker only)
  Scratch scratch;
  Scratch staging;  // copies of inputs an algorithm would clobber (worker only)
  Arrivals arrivals;

  mutable std::mutex cost_mu;
  LinkCost cost, inter_cost;

  // Collectives run one at a time, in submission order: on the worker thread,
  // or on a thread that waits for one before the worker took it (help()), so
  // a caller that waits at once pays no thread hand-off.
  struct Task {
    uint64_t seq;
    std::function<void(bool on_worker)> run;
  };
  //
  // Waking the worker costs more than many collectives take, and on a machine
  // whose cores are all busy the woken worker takes a core from a rank inside
  // a collective (measured: 256 KiB shm all-reduces 50 -> 28 us median without
  // the wake). So submit() wakes it only for `background` collectives (or when
  // it sleeps for good, below); a caller that waits runs the collective
  // itself. While collectives keep coming (kStayAwake) the worker naps in
  // kTick steps and starts, within kTick, any that nobody waits for. The tick
  // is coarse because each nap costs a wake-up: at 1 ms (30 per step of the
  // CNN) two data-parallel ranks on two cores trained 6-12 % slower.
  static constexpr Duration kTick = std::chrono::milliseconds(10);
  static constexpr Duration kStayAwake = std::chrono::seconds(1);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> queue;
  bool running = false;  // a task is executing (on the worker or a helper)
  bool ticking = false;  // the worker naps in kTick steps
  Clock::time_point last_submit{};
  bool stopping = false;
  uint64_t next_seq = 1;
  std::thread worker;

 private:
  void run();
  // Runs the oldest queued collective with `lock` (on mu) released meanwhile.
  void run_front(std::unique_lock<std::mutex>& lock, bool on_worker);
  // Runs queued collectives up to `seq` in the calling thread, unless one is
  // already running elsewhere.
  void help(uint64_t seq);
};

}  // namespace braid::comm
