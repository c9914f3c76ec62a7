// In-job recovery of data-parallel replicas (`parallel.fault_tolerance =
// replica`, docs/fault_tolerance.md): the replicas average their gradients
// over a communicator of the current members; when a replica is lost
// (killed, unreachable, past the collective timeout) the survivors agree on
// the next membership through the store, build a new communicator over
// themselves, redo the step's average among themselves and go on; a
// replacement registers in the store, is admitted at a step boundary and
// receives the current state from a live member over the transport.
//
// Membership is a sequence of epochs. Epoch 0 is every slot of the job; epoch
// E + 1 is decided by whoever first writes `<prefix>/e<E+1>/record` (the
// store's compare_set), so every member reads the same list:
//
//   1. each member that leaves epoch E (its all-reduce failed, or a joiner
//      was announced) checks in at `<prefix>/e<E>/in/<slot>` with its
//      position (optimizer steps applied);
//   2. it waits until every candidate (the members of E, and at an admission
//      the joiners announced for E) has checked in or is dead: its heartbeat
//      (`<prefix>/hb/<slot>`, comm::Heartbeat) silent for max_silence, or
//      absent when the wait reaches the collective timeout;
//   3. it proposes the checked-in candidates with their positions; the first
//      proposal stored wins, and a member left out of it stops (it came late);
//   4. the members of E + 1 build a tcp transport under `<prefix>/e<E+1>`,
//      and the lowest member with the largest position sends its state to
//      every member behind it (a joiner, position -1; or a survivor whose
//      all-reduce failed while the others' completed and applied the step).
//
// Slots are the job's ranks as launched (0 .. slots-1); a replacement takes
// the lost replica's slot, so it reads the same data shard.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/comm/communicator.h"
#include "braid/comm/store/store.h"
#include "braid/comm/transport/transport.h"
#include "braid/comm/store/rendezvous.h"

namespace braid::parallel::fault_tolerance {

struct ReplicaGroupOptions {
  int slot = 0;
  int slots = 1;  // replicas the job started with
  // A replacement: waits to be admitted and receives the state (join()).
  bool joining = false;
  // Store namespace of this job's membership (one per launch attempt).
  std::string prefix = "braid/ft";
  // Digest of the run's configuration: a joiner whose digest differs from
  // the members' is refused with both.
  std::string config_hash{};
  Duration timeout = std::chrono::seconds(300);  // per collective, and per membership wait
  // A heartbeat silent this long marks its replica dead during an agreement.
  Duration max_silence = std::chrono::seconds(1);
  std::string token{};
  std::string host = "127.0.0.1";  // tcp: address this replica listens on
  // The transport of one membership epoch between `size` members, this one
  // being `rank`; null: tcp through the store under `prefix`.
  std::function<std::shared_ptr<comm::Transport>(comm::Store& store, const std::string& prefix, int rank, int size)>
      make_transport{};
};

// One change of membership, as logged and written to metrics.jsonl.
struct MembershipChange {
  int64_t epoch = 0;   // the new epoch
  int64_t step = 0;    // optimizer steps the new members hold (the largest position)
  std::vector<int> members{}, left{}, joined{};
  std::string reason{};  // the failure that started it, or "admission"
  double seconds = 0;  // from entering the agreement to the new communicator (and state) ready
  int source = -1;     // the slot that sent its state, -1: none sent
  std::vector<int> received{};  // slots that took that state
  std::string describe() const;
};

class ReplicaGroup {
 public:
  // Serialises this replica's whole training state; restores one (position included).
  using SaveState = std::function<std::vector<std::byte>()>;
  using LoadState = std::function<void(std::span<const std::byte>)>;

  // Members of epoch 0 (not joining) connect to each other here; a joiner only
  // registers (join() waits). `store` is cloned.
  ReplicaGroup(const comm::Store& store, ReplicaGroupOptions options);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  void set_state_io(SaveState save, LoadState load) { save_ = std::move(save), load_ = std::move(load); }

  // A joiner: registers its slot, waits until the members admit it at a step
  // boundary and loads the state a member sends; false when the members
  // finished training first (nothing left to join). ConfigError naming both
  // digests when its configuration differs from the members'.
  bool join();
  // A member at the end of training: replacements still waiting stop (join()
  // returns false) instead of waiting out the timeout and failing the job.
  void finish();

  enum class Outcome {
    averaged,  // `grad` holds the mean of the members' gradients
    replaced,  // members had applied this step already: the state was loaded, skip the update
  };
  // Every member's `grad` summed and divided by the members that contributed
  // (the survivors after a failure), in place. `position`: optimizer steps
  // this replica has applied. On a failure, agrees on the survivors and
  // averages again among them from this replica's own gradient.
  Outcome average(std::span<float> grad, int64_t position);
  // After a step's update (`position` steps applied): admits replacements the
  // members learnt of during that step's average, sending them the state.
  void at_step_boundary(int64_t position);

  // A replacement not admitted yet.
  bool needs_join() const { return members_.empty(); }
  int slot() const { return o_.slot; }
  const std::vector<int>& members() const { return members_; }
  int64_t epoch() const { return epoch_; }
  // The lowest member writes the job's reports.
  bool leads() const { return !members_.empty() && members_.front() == o_.slot; }
  // Changes since the last call, oldest first.
  std::vector<MembershipChange> take_changes();
  const comm::Communicator& comm() const { return comm_; }

 private:
  std::string key(const std::string& rest) const { return o_.prefix + "/" + rest; }
  // The agreement of steps 1-4 above, repeated until a communicator of the
  // new members (and the state transfer) succeeds; `admission`: joiners
  // announced for the current epoch are candidates.
  void reconfigure(int64_t position, const std::string& reason, bool admission);
  void connect(const std::string& prefix, int rank, int size);
  // The leader's check at a step boundary: replacements registered for slots
  // that are not members, announced for the current epoch.
  bool announce_joiners();
  void transfer_state(const std::vector<int>& members, const std::vector<int64_t>& positions, MembershipChange& change);

  ReplicaGroupOptions o_;
  comm::Store store_;
  std::unique_ptr<comm::Heartbeat> beat_;  // this slot's, while the group lives
  SaveState save_;
  LoadState load_;
  int64_t epoch_ = 0;
  std::vector<int> members_;
  std::shared_ptr<comm::Transport> transport_;
  comm::Communicator comm_;
  // Communicators of earlier epochs: a failed one is closed with the group,
  // not on the step's path (closing waits for peers that no longer answer).
  std::vector<std::pair<comm::Communicator, std::shared_ptr<comm::Transport>>> retired_;
  bool admit_pending_ = false;
  bool replaced_ = false;  // the last reconfigure loaded a peer's state
  std::vector<float> scratch_;
  std::vector<MembershipChange> changes_;
};

}  // namespace braid::parallel::fault_tolerance
