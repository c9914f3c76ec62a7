// Communicator internals shared by communicator.cc (public calls, the queue) and
// communicator_split.cc (split, host discovery, hierarchical all-reduce).
//
// Tags: braid/comm/tags.h. Threads: braid/comm/engine.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "braid/comm/arrivals.h"
#include "braid/comm/communicator.h"
#include "braid/comm/engine.h"
#include "braid/comm/history.h"
#include "braid/comm/shared_arena.h"
#include "braid/comm/tags.h"

namespace braid::comm {

// What the communicators split from one root share on this rank: the engine
// that lends them threads, and the ids they have taken.
struct CommFamily {
  Engine engine;
  std::mutex ids_mu;
  // Ids of this rank's communicators, and ids held by splits in progress
  // (communicator_split.cc). Never shrinks: an id is not reused.
  std::set<uint32_t> ids{kRootCommunicatorId};

  // Every communicator of the family on this rank, for history dumps
  // (communicator_history.cc): one file per rank holds them all.
  std::mutex comms_mu;
  std::vector<std::weak_ptr<Communicator::Impl>> comms;
  // Writes <dir>/rank-<transport rank>.json (serialised: failures and
  // peers' questions may ask at once). Never throws.
  void dump_history(const std::string& dir, int transport_rank, const std::string& reason);
  std::mutex dump_mu;
};

struct Communicator::Impl final : std::enable_shared_from_this<Communicator::Impl>, Engine::Queue {
  Impl(std::shared_ptr<Transport> transport, CommOptions options, std::vector<int> members, int rank,
       uint32_t id, std::shared_ptr<CommFamily> family);
  // Lets queued collectives finish (or time out) first.
  ~Impl();

  // Builds an Impl and registers it with its family (for history dumps).
  static std::shared_ptr<Impl> create(std::shared_ptr<Transport> transport, CommOptions options,
                                      std::vector<int> members, int rank, uint32_t id,
                                      std::shared_ptr<CommFamily> family);

  // Queues `body` as the collective `info` describes; the Work completes when
  // body returns or throws. Its name is formatted only if a message needs it:
  // a small collective takes less time than formatting its name. On a
  // communicator that has failed, the Work fails at once (CommunicatorFailed).
  Work submit(const OpInfo& info, Duration timeout, std::function<void(Group&)> body, bool background = false);
  Duration timeout_or_default(Duration t) const { return t.count() > 0 ? t : options.timeout; }

  // Worker-side helpers (communicator_split.cc).
  Communicator split_now(Group& g, int color, int key);
  // The id of a split's children, agreed by every rank of g; `highest`: each
  // rank's highest_id() when the split started.
  uint32_t agree_on_child_id(Group& g, bool member, std::vector<uint32_t> highest);
  uint32_t highest_id() const;  // the largest id this rank's family has taken
  void discover_hosts(Group& g);
  void hierarchical_allreduce(Group& g, const ReduceArgs& a);
  std::atomic<int> hosts{0};  // distinct hosts in the group; 0 until discovered (set by the thread running the queue)
  Communicator local, leaders;

  // The shared-memory arena (shared_arena.h), set up by the first collective
  // that wants it; null when the ranks cannot share memory (the thread running the queue only).
  SharedArena* arena(Group& g);
  // Whether `automatic` may pick shared_memory: the group is known to be on
  // one host (shm and inproc transports, a hierarchical all-reduce's host
  // group). Over tcp or mpi on one host braid keeps to the named transport
  // unless the caller names shared_memory.
  bool arena_by_default = false;
  // Whether an all-reduce with `a` will go through the arena. Such a
  // collective is memory copies on every rank's own cores: started early on
  // an engine thread it competes with the computation it was meant to overlap (two
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
  std::shared_ptr<CommFamily> family;
  Scratch scratch;
  Scratch staging;  // copies of inputs an algorithm would clobber (the thread running the queue only)
  std::shared_ptr<History> history;  // before `arrivals`, which answers from it
  Arrivals arrivals;

  // The first failure, once one happened (communicator_history.cc). A failed
  // communicator refuses every later collective: their messages would meet
  // the failed one's leftovers.
  std::atomic<bool> failed{false};
  std::mutex failure_mu;
  std::string failure;  // the first failure's message (failure_mu)
  // Records the failure of collective `seq` (the first one sticks), tells
  // the peers, and dumps the history. Returns the error the Work completes with.
  // `window`: how long the peers are asked for; `work` names the collective.
  std::exception_ptr fail_collective(uint64_t seq, Clock::time_point start, Duration window, const Work& work,
                                     std::exception_ptr error);
  std::exception_ptr refusal(uint64_t seq, const OpInfo& info);
  // The body picked `a` for the running collective (shown in history and traces).
  void ran_with(Algorithm a);
  std::atomic<uint64_t> running_seq{0};
  std::atomic<Algorithm> ran{Algorithm::automatic};  // what ran_with last recorded

  mutable std::mutex cost_mu;
  LinkCost cost, inter_cost;

  // Collectives run one at a time, in submission order: on a thread the
  // family's engine lends (engine.h), or on a thread that waits for one
  // before the engine's thread took it (help()), so a caller that waits at
  // once pays no thread hand-off.
  struct Task {
    uint64_t seq;
    std::function<void(bool on_worker)> run;
  };
  //
  // Waking a thread costs more than many collectives take, and on a machine
  // whose cores are all busy the woken thread takes a core from a rank inside
  // a collective (measured: 256 KiB shm all-reduces 50 -> 28 us median without
  // the wake). So submit() posts the queue to the engine at once only for
  // `background` collectives; otherwise it posts it lazily (the engine starts
  // it within Engine::kTick if nobody waits for it first), and only when no
  // post is outstanding already.
  std::mutex mu;
  std::condition_variable cv;  // ~Impl waits here for the queue to drain
  std::deque<Task> queue;
  bool running = false;    // a task is executing (on an engine thread or a helper)
  int posts = 0;           // engine posts not yet answered by drain()
  bool posted_now = false; // one of them is an immediate post()
  uint64_t next_seq = 1;

  // Engine::Queue: runs the queue on the engine's thread until it is empty.
  void drain(bool lazy) override;

 private:
  // Runs the oldest queued collective with `lock` (on mu) released meanwhile.
  void run_front(std::unique_lock<std::mutex>& lock, bool on_worker);
  // Runs queued collectives up to `seq` in the calling thread, unless one is
  // already running elsewhere.
  void help(uint64_t seq);
  // Has an engine thread run the queue now (mu held).
  void post_now();
};

}  // namespace braid::comm
