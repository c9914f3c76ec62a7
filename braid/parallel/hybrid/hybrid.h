// Timeout-hybrid synchronisation (`parallel.strategy = hybrid`,
// docs/aggregation.md): a synchronous step that waits for the replicas'
// gradients only until a deadline, then goes on with what arrived. Every
// replica applies the same aggregate, so the replicas stay identical:
//
//   before_forward     workers post the receive of this step's aggregate;
//                      the coordinator (data rank 0) the receives of the
//                      workers' gradients
//   combine_gradients  workers send their gradient of step k (tagged k) to
//                      the coordinator and wait for the aggregate of step k;
//                      the coordinator waits until its own gradient is ready
//                      + hybrid.timeout_ms (0: for every gradient), takes
//                      what arrived and the late gradients the rules allow
//                      (inbox.h), and sends every worker
//                        a(k) = sum_i w_i g_i / sum_i w_i
//                      with the record of who is in it; every rank puts a(k)
//                      in .grad, and the local optimizer then steps alike
//                      everywhere
//   finish             the end-of-run counts from the coordinator, float
//                      buffers (batch-norm statistics, local) averaged, and a
//                      check that the parameters are bit-identical everywhere
//
// A worker behind the coordinator finds the aggregates it missed waiting and
// applies them one per step without waiting. With catch_up = skip (the
// default) it does not compute those steps' gradients at all, which could
// only be late (step_decided(): the trainer skips forward and backward), so a
// worker slower than the others every step keeps up by contributing to every
// few steps; with compute it computes every step and hybrid.max_lag bounds
// how far behind it may fall before the coordinator waits for it. The
// coordinator does not wait for a worker that still owes an earlier step. A
// slow coordinator slows everyone: every step needs its aggregate.
//
// With hybrid.timeout_ms = 0 every step waits for every gradient: synchronous
// SGD (the mean gradient), up to the order of the float sums.
//
// Bytes per step: a worker sends n s (its gradient); the coordinator sends
// (P-1) n s (the aggregate to each) and receives as much, against
// 2 (P-1)/P n s per rank for a bandwidth-optimal all-reduce: the coordinator's
// link carries the load, as a single parameter server's would.
#pragma once

#include <deque>
#include <memory>
#include <optional>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/flat_replica.h"
#include "braid/parallel/hybrid/inbox.h"
#include "braid/parallel/hybrid/replicas.h"

namespace braid::parallel::hybrid {

class TimeoutHybrid final : public Aggregation {
 public:
  TimeoutHybrid(comm::Communicator data_axis, HybridOptions options);

  std::string name() const override { return "hybrid"; }
  // Checks that the replicas agree on the model and `description` and makes
  // them start from data rank 0's parameters and buffers.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void before_forward() override;
  // A worker whose aggregate of this step is already in (the coordinator
  // closed the step without it) with catch_up = skip: true, and this step
  // sends the coordinator a header saying so instead of a gradient.
  bool step_decided() override;
  void combine_gradients() override;
  void after_step() override;
  void finish() override;
  nlohmann::json state_dict() const override { return {{"steps", steps_}}; }
  void load_state_dict(const nlohmann::json& state) override;
  // The parameters (equal everywhere) and the averaged float buffers (collective).
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  const StepRecord& last() const { return last_; }  // the latest step's record
  const HybridTotals& totals() const { return totals_; }
  double bytes_sent() const { return bytes_; }

 private:
  struct Outgoing {  // the coordinator's sends of one step's aggregate
    std::shared_ptr<std::vector<int64_t>> header;
    Tensor values;
    std::vector<comm::Work> works;
    int64_t step;
  };
  struct Expected {  // a worker's posted receive of one step's aggregate
    std::shared_ptr<std::vector<int64_t>> header;
    Tensor values;
    comm::Work header_work, values_work;
  };
  struct Sent {  // a worker's gradient on its way: header [step, follows], values
    int64_t step;
    std::shared_ptr<std::vector<int64_t>> header;
    Tensor grad;
    std::vector<comm::Work> works;
  };
  void coordinate();
  void follow();
  void count(const StepRecord& r);
  void reap(int64_t through);  // waits for the coordinator's sends of steps <= through
  void reap_sent(int64_t through);  // a worker's sends: those done, and those of steps <= through
  void expect();               // a worker posts the receive of step steps_'s aggregate
  std::string context(const std::string& what) const;

  comm::Communicator comm_;
  HybridOptions o_;
  FlatParams flat_;
  std::vector<NamedParameter> buffers_;
  std::unique_ptr<Inbox> inbox_;   // the coordinator's
  std::deque<Outgoing> outgoing_;  // the coordinator's
  std::optional<Expected> expected_;
  std::deque<Sent> sent_;
  int64_t steps_ = 0;              // steps taken since the start of training (tags)
  StepRecord last_;
  HybridTotals totals_;
  double bytes_ = 0, waited_s_ = 0;
  bool combined_ = false;          // combine_gradients() ran in this step
  bool skipping_ = false;          // step_decided() said so in this step
  bool ready_ = false;
};

}  // namespace braid::parallel::hybrid
