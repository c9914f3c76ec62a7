// The exchange of asynchronous gossip (gossip.mode = async, gossip.h): no
// rank ever waits for a neighbour within a run. Every rank
//
//   offer   sends its weights to each out-neighbour whose previous message
//           has left (else skips it this round: that neighbour gets a newer
//           one next time; one send buffer per out-neighbour, so a slow
//           neighbour holds back only its own messages)
//   poll    takes every message that has arrived and keeps, per
//           in-neighbour, only the latest weights, with the sender's step,
//           until the caller has used them
//   close   after the last step: tells its out-neighbours it is done, takes
//           messages until every in-neighbour has said the same (up to the
//           timeout), and waits for its own sends
//
// Messages are a header [sender's step, last] and the values, on two fixed
// tags: matched in posting order, the k-th header goes with the k-th values.
// Every in-neighbour has one pair of receives posted at all times, so a
// rendezvous transport's send completes as soon as the receiver polls; on a
// stream transport messages a slow receiver has not yet taken wait in its
// transport's buffer (bounded by parallel.max_message_mib per peer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::gossip {

class LatestExchange {
 public:
  LatestExchange(comm::Communicator comm, std::vector<int> in, std::vector<int> out, int64_t entries, DType dtype,
                 Duration timeout);
  // Receives and sends still posted keep their buffers until the transport
  // finishes them (see the .cc).
  ~LatestExchange();
  LatestExchange(const LatestExchange&) = delete;
  LatestExchange& operator=(const LatestExchange&) = delete;

  // Sends this rank's weights at `step` (pack(buffer) fills a buffer) to
  // every out-neighbour whose previous message has left; returns how many.
  int offer(const std::function<void(const Tensor&)>& pack, int64_t step);
  // Takes every message that has arrived; never waits. `step`: this rank's (for errors).
  void poll(int64_t step);
  // In-neighbour j's latest weights, the step it sent them at, and whether
  // they arrived since the caller last used them (use(j)).
  const Tensor& latest(size_t j) const { return slots_[j].latest; }
  int64_t sender_step(size_t j) const { return slots_[j].step; }
  bool fresh(size_t j) const { return slots_[j].fresh; }
  void use(size_t j) { slots_[j].fresh = false; }
  size_t in_degree() const { return slots_.size(); }
  int64_t offers_skipped() const { return skipped_; }  // per out-neighbour
  // After the last step (`step` steps taken); collective with the neighbours.
  // What arrives meanwhile is taken and left unused.
  void close(int64_t step);

 private:
  struct Flight {  // one message on its way: its own header, and the works of header and values
    std::shared_ptr<std::vector<int64_t>> header;
    std::vector<comm::Work> works;
  };
  struct Outbox {  // one out-neighbour
    int to = -1;
    Tensor values;                // read by every message in flight: repacked only when none is
    std::vector<Flight> flights;
  };
  struct Slot {
    int from = -1;
    std::shared_ptr<std::vector<int64_t>> header;  // [step, last]
    Tensor values, latest;
    comm::Work header_work, values_work;
    int64_t step = -1;
    bool fresh = false, ended = false;
  };
  void post(Slot& s);
  // Takes slot s's completed message (errors with context); reposts unless it was the last.
  void take(Slot& s);
  void send(Outbox& o, int64_t step, bool last);
  // Drops o's finished flights (a failed one: PeerError with context); true when none is left.
  bool idle(Outbox& o);
  // Waits for one message's sends (up to the timeout; errors name `what` and the neighbour).
  void wait_flight(const Outbox& o, const Flight& f, const char* what) const;
  void wait_sends(const char* what);
  std::string context(const std::string& what) const;

  comm::Communicator comm_;
  int64_t entries_;
  DType dtype_;
  Duration timeout_;
  std::vector<Slot> slots_;
  std::vector<Outbox> outboxes_;
  int64_t skipped_ = 0;
  int64_t step_ = 0;  // this rank's step, for errors
  bool closed_ = false;
};

}  // namespace braid::parallel::gossip
