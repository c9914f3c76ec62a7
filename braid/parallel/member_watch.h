// Whether every member of a group that never communicates is still alive
// (an ensemble's members while they train): each member bumps a counter in
// the job's store every `interval` on a thread of its own (comm::Heartbeat),
// and a second thread reads every member's counter every `interval`
// (comm::HeartbeatMonitor). A member whose counter has not moved for
// `max_silence` is dead: a killed process, a lost host. It measures
// liveness, not progress: a slow member keeps beating.
//
// Cost per member and interval: one store write and K reads of a few bytes,
// none of them on the training thread.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braid/comm/store/rendezvous.h"
#include "braid/comm/store/store.h"

namespace braid::parallel {

class MemberWatch {
 public:
  // Starts both threads; `store` is cloned (each thread has its own connection).
  MemberWatch(const comm::Store& store, std::string prefix, int member, int members, Duration max_silence);
  ~MemberWatch();
  MemberWatch(const MemberWatch&) = delete;
  MemberWatch& operator=(const MemberWatch&) = delete;

  // Members silent for longer than max_silence, ascending; empty while all beat.
  std::vector<int> dead() const;
  bool any_dead() const { return any_dead_.load(std::memory_order_relaxed); }
  Duration max_silence() const { return max_silence_; }

 private:
  Duration max_silence_;
  comm::Heartbeat beat_;
  std::atomic<bool> stop_{false}, any_dead_{false};
  mutable std::mutex mu_;
  std::vector<int> dead_;
  std::thread thread_;
};

}  // namespace braid::parallel
