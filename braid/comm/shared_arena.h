// SharedArena: one shared-memory mapping that every rank of a group on one
// host sees, for collectives that move data through memory instead of
// messages (algorithms/shared_memory.cc).
//
// Layout: a header page, then per rank a control block (a phase counter the
// rank bumps at every step of a collective, and a count of ranks asleep on
// it) and a slot of 2 x chunk bytes (two halves, so a rank fills the next
// chunk while others still read the last one).
//
// Set up collectively over the group's transport (create()): rank 0 makes the
// segment, sends its name, every rank maps it and checks a random cookie, the
// ranks agree on whether all succeeded, then rank 0 unlinks the name, so
// nothing is left in /dev/shm however the job ends. Ranks that cannot share
// memory (different hosts, a different /dev/shm) get no arena; callers fall
// back to message-passing algorithms.
//
// Waiting: spin (up to 1 ms when each rank has a core), then sleep on the
// counter's futex; a sleeping rank checks that the rank it waits for is alive
// (its pid is in the segment), so a killed peer fails the collective at once
// instead of at the deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "braid/comm/algorithms/group.h"

namespace braid::comm {

class SharedArena {
 public:
  // Collective over `g` (every rank calls it in the same collective); null when
  // some rank could not map the segment. `chunk` is the bytes one rank
  // contributes per step.
  static std::unique_ptr<SharedArena> create(Group& g, size_t chunk);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // One rank's control block in the segment.
  struct Control;

  size_t chunk() const { return chunk_; }
  // Half `half` (0 or 1) of rank r's slot: chunk() bytes.
  std::byte* slot(int r, int half) const;

  // Steps this rank has finished so far (the same on every rank between collectives).
  uint32_t phase() const { return phase_; }
  // What this rank is about to run (element count, dtype/op code), written
  // before its first step so the others can check it (check_declarations()).
  void declare(uint64_t count, uint64_t kind);
  // After the first step's wait_all: throws ValueError naming a rank whose
  // declaration differs from ours (ranks would otherwise wait for steps that
  // never come).
  void check_declarations(const char* op);

  // Marks this rank's next step done (phase + 1) and wakes ranks asleep on it.
  // Returns the new phase.
  uint32_t advance();
  // Waits until every rank has reached `phase`; throws PeerTimeout (past the
  // group's deadline) or PeerError (a rank died) naming the rank it waited for.
  void wait_all(Group& g, uint32_t phase);
  // Once a wait failed the ranks' phases no longer line up: later collectives
  // must not use the arena.
  bool broken() const { return broken_; }

 private:
  SharedArena(void* base, size_t bytes, int ranks, int me, size_t chunk);
  Control& control(int r) const;
  void wait_for(Group& g, int r, uint32_t phase);

  void* base_;
  size_t bytes_;
  int ranks_, me_;
  size_t chunk_;
  bool oversubscribed_;  // more ranks than cores: waiters sleep at once (see kSpinOwnCore)
  uint32_t phase_ = 0;
  bool broken_ = false;
};

}  // namespace braid::comm
