// faulty: a Transport wrapper that injects faults for tests (this kernel has
// no netem): delay every send (a slow link or a slow rank), limit each link's
// bandwidth (a shaped link: sends queue behind each other), drop messages to
// some peers (a silent partition: the sender sees success, the receiver only
// a timeout), or cut the link to some peers (both sides' operations with them
// fail at once with PeerError). The plan can change while traffic flows, so
// a test can cut a link in the middle of a collective. An all-reduce that
// takes the shared-memory path (`auto` with every rank on one host) never
// touches the transport: name a message-passing algorithm to put it under the
// plan.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "braid/comm/transport/transport.h"

namespace braid::comm {

struct FaultPlan {
  // Added before each send is handed to the inner transport (microseconds).
  std::chrono::microseconds send_delay{0};
  // Bytes per second each link (this rank -> one peer) carries; 0: no limit.
  // A send occupies its link for bytes / link_bytes_per_s after the sends
  // queued before it, and is handed over when its last byte has gone (plus
  // send_delay), like a store-and-forward hop behind a shaper.
  double link_bytes_per_s = 0;
  // Sends to these peers complete at once and never arrive.
  std::set<int> drop_to{};
  // Every send to and receive from these peers fails with PeerError.
  std::set<int> cut{};
};

class FaultyTransport final : public Transport {
 public:
  FaultyTransport(std::unique_ptr<Transport> inner, FaultPlan plan);
  ~FaultyTransport() override;

  void set_plan(FaultPlan plan);
  FaultPlan plan() const;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return "faulty+" + inner_->name(); }
  Work send(int peer, uint64_t tag, std::span<const std::byte> data) override;
  Work recv(int peer, uint64_t tag, std::span<std::byte> data) override;

  struct Delayer;

 private:
  std::unique_ptr<Transport> inner_;
  mutable std::mutex mu_;
  FaultPlan plan_;
  std::map<int, Clock::time_point> link_free_;  // peer -> when its link is idle again
  std::unique_ptr<Delayer> delayer_;
};

}  // namespace braid::comm
