// The coordinator's side of timeout-hybrid synchronisation (hybrid.h): which
// gradients make a step's aggregate. It keeps a posted receive for every
// (worker, step) until that gradient has arrived, so every buffer outlives
// the transport's write into it, and sorts each gradient once:
//
//   on time   arrived by the step's deadline: weight 1 in its own step
//   late      missed it; `drop`: given up at once; `stale`: applied in the
//             first later step k it has arrived by, with weight
//             stale_weight^(k - j) for a gradient of step j, unless k - j
//             would exceed max_staleness: then given up
//   lagging   a worker whose gradient of step k - max_lag has not arrived
//             when step k closes is waited for (up to the timeout): no
//             worker falls more than max_lag steps behind the coordinator
//   behind    a worker that has not yet sent its word for an earlier step
//             is not waited for: its gradient of this step is at least a
//             whole step of compute away (with a deadline; never when
//             waiting for every gradient)
//
// Every gradient comes as a header on grad_tag [step, follows] and, when
// `follows`, the values on values_tag. A worker that caught up by skipping a
// step already closed (catch_up = skip) sends the header alone; the
// coordinator posts the values' receive only once the header says they come.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::hybrid {

enum class Late { drop, stale };
Late parse_late(const std::string& name);  // ConfigError for an unknown name
// What a worker does at a step the coordinator has already closed without it
// (its aggregate is waiting before forward): `skip` applies it without
// computing a gradient that could only be late; `compute` computes it anyway
// (its gradient may still count with late = stale).
enum class CatchUp { skip, compute };
CatchUp parse_catch_up(const std::string& name);
// Who closes a step (hybrid.via): data rank 0 as the coordinator (hybrid.h),
// or every rank in one all-reduce at the deadline (deadline_allreduce.h).
enum class Via { coordinator, allreduce };
Via parse_via(const std::string& name);

struct InboxOptions {
  Duration wait{};            // after the coordinator's own gradient; 0: every gradient of the step
  Late late = Late::drop;
  double stale_weight = 0.5;  // lambda in (0, 1]
  int64_t max_staleness = 4;  // in [0, 62]
  int64_t max_lag = 8;        // >= 1
  CatchUp catch_up = CatchUp::skip;
  Duration timeout = std::chrono::seconds(300);
  Via via = Via::coordinator;  // read by the plan factory: which class closes the steps
};

// ConfigError naming the key for an option out of its range.
void check_options(const InboxOptions& o);

// One step's aggregate as every rank learns it (the coordinator's header).
struct StepRecord {
  int64_t step = -1;          // counted from 0
  int64_t arrived = 0;        // this step's gradients in it, the coordinator's own included
  int64_t late = 0;           // this step's gradients that missed the deadline
  int64_t stale = 0;          // earlier late gradients applied in this step
  int64_t dropped = 0;        // late gradients given up in this step
  int64_t skipped = 0;        // of those, never computed (the worker caught up by skipping)
  int64_t max_staleness = 0;  // of the stale ones applied
  int64_t lag = 0;            // most gradients any worker still owed when the step closed
  double weight = 0;          // sum of the weights: the aggregate is sum w g / weight
  std::vector<uint64_t> included;  // [ranks] bit s: the rank's gradient of step - s is in it

  // [kWords + ranks] int64 words, as the coordinator sends it.
  static constexpr size_t kWords = 9;
  std::vector<int64_t> encode() const;
  static StepRecord decode(const std::vector<int64_t>& words, int ranks);
};

// The tags of the protocol (p2p tags are < 2^39).
inline uint64_t grad_tag(int64_t step) { return (static_cast<uint64_t>(step) % (uint64_t{1} << 36)) * 4; }
inline uint64_t aggregate_tag(int64_t step) { return grad_tag(step) + 1; }
inline uint64_t totals_tag(int64_t step) { return grad_tag(step) + 2; }
inline uint64_t values_tag(int64_t step) { return grad_tag(step) + 3; }

class Inbox {
 public:
  // `entries` elements of `dtype` per gradient.
  Inbox(comm::Communicator comm, InboxOptions options, int64_t entries, DType dtype);

  // The first step to receive gradients of (a resumed run's step count);
  // only while no receive is posted.
  void start_at(int64_t step);
  // Posts the receives of every worker's gradients of steps up to `step`.
  void post_through(int64_t step);
  // Closes `step`: waits as the rules above say (from `deadline` on for this
  // step's gradients) and adds w * g of every gradient it takes to `sum`
  // ([entries] f64, holding the coordinator's own gradient with weight 1).
  StepRecord collect(int64_t step, Deadline deadline, std::vector<double>& sum);
  // After the last step: waits for every receive still posted. Returns the
  // late gradients never applied (dropped) and the headers of skipped steps
  // not yet counted.
  struct Drained {
    int64_t dropped = 0, skipped = 0;
  };
  Drained drain();

 private:
  enum class State { pending, late, dropped };
  struct Incoming {
    int64_t step;
    std::shared_ptr<std::vector<int64_t>> header;  // [step, follows]
    comm::Work header_work;
    Tensor grad;                      // once the header said the values follow
    std::optional<comm::Work> values_work;
    State state;
  };
  // Posts the values' receive once the header says they come; true when the
  // gradient is in (or the header says it never will be).
  bool arrived(Incoming& in, int rank);
  bool skipped(const Incoming& in) const { return in.header_work.done() && (*in.header)[1] == 0; }
  // Waits for the gradient until `deadline` (TimeoutError, PeerError with context).
  void wait_for(Incoming& in, int rank, Deadline deadline, std::string_view what);
  void add(const Incoming& in, double weight, std::vector<double>& sum) const;
  std::string context(int rank, int64_t step, std::string_view what) const;
  void check(const Incoming& in, int rank) const;  // PeerError with context if a receive failed

  comm::Communicator comm_;
  InboxOptions o_;
  int64_t entries_;
  DType dtype_;
  std::vector<std::deque<Incoming>> queue_;  // [rank] in step order
  int64_t posted_ = -1;                       // receives posted through this step
};

}  // namespace braid::parallel::hybrid
