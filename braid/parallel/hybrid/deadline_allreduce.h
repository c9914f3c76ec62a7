// Timeout-hybrid synchronisation without a coordinator (`hybrid.via =
// allreduce`, docs/aggregation.md). The rules are the coordinator's
// (hybrid.h): a step goes on with the gradients that made its deadline, late
// ones are dropped or applied stale with weight stale_weight^staleness, and
// every replica applies the same aggregate. What differs is who closes a
// step: every rank, in one all-reduce of the weighted gradients it holds.
//
// A thread of each rank's own (the step closer) joins step k's all-reduce as
// soon as its training thread hands it the gradient of step k, or when
// hybrid.timeout_ms have passed since step k - 1's aggregate arrived here,
// with zeros in place of the gradient it does not have yet. The deadline thus
// runs on every rank from nearly the same moment (the end of the previous
// all-reduce), no rank's compute paces the others, and each rank sends
// 2 (P-1)/P of the gradient a step, as any bandwidth-optimal all-reduce does,
// where the coordinator's link carries (P-1) gradients each way. A slow rank
// still takes part in every all-reduce: only its closer, which waits on a
// clock, has to keep up.
//
// The all-reduce of a step is two: the values (sum of w g over the ranks) and
// a record of int64 words (who is in it, with which staleness; counts), from
// which every rank computes the same weight sum w. A gradient handed after
// its step closed is late: dropped, or kept for the next step the closer
// joins. A rank whose step k has closed without it skips that step's forward
// and backward (catch_up = skip) or computes it anyway (compute); the closer
// joins step k only while the training thread is fewer than max_lag steps
// behind it, else it waits for the training thread (up to the timeout).
//
// The closers do not know how many steps the run has: after its last step a
// rank's closer joins every further all-reduce at once, marked done, until the
// record says every rank is done; those steps' aggregates are not applied.
// With hybrid.timeout_ms = 0 a step waits for every gradient: synchronous SGD;
// so does the first step of a run (or of a resumed one), whose compute holds
// the warm-up.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/flat_replica.h"
#include "braid/parallel/hybrid/replicas.h"

namespace braid::parallel::hybrid {

class DeadlineAllreduce final : public Aggregation {
 public:
  DeadlineAllreduce(comm::Communicator data_axis, HybridOptions options);
  ~DeadlineAllreduce() override;  // stops the step closer

  std::string name() const override { return "hybrid"; }
  // Checks that the replicas agree, makes them start from data rank 0's
  // parameters, and splits a communicator for the step closer.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void before_forward() override;
  // catch_up = skip: true when this step has closed without this rank.
  bool step_decided() override;
  // Hands the gradient (or the skip) to the step closer and puts the step's
  // aggregate in .grad.
  void combine_gradients() override;
  void after_step() override;
  // Drains the closers, takes the run's counts, averages float buffers and
  // checks that the replicas are bit-identical.
  void finish() override;
  nlohmann::json state_dict() const override { return {{"steps", steps_}}; }
  void load_state_dict(const nlohmann::json& state) override;
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  const StepRecord& last() const { return last_; }
  const HybridTotals& totals() const { return totals_; }
  double bytes_sent() const;

 private:
  struct Handed {  // a gradient on its way to the closer
    int64_t step;
    Tensor grad;
  };
  struct Closed {  // a step's aggregate and record
    StepRecord record;
    Tensor values;
  };
  void start();   // the closer, at the first step
  void stop();    // tells the closer to end and joins it
  void close_steps(int64_t first);  // the closer's loop
  // Under mu_: waits until step k may close (its gradient, the deadline with
  // the lag bound met, or the end; the run's first step: its gradient); false
  // when told to stop.
  bool wait_to_close(std::unique_lock<std::mutex>& lock, int64_t k, bool first, Clock::time_point opened);
  std::string context(const std::string& what, int64_t step) const;

  comm::Communicator comm_;    // the training thread's: setup, checkpoints, finish
  comm::Communicator closer_;  // the closer's: one all-reduce pair per step
  HybridOptions o_;
  FlatParams flat_;
  std::vector<NamedParameter> buffers_;
  int64_t steps_ = 0;  // steps the training thread has taken since the start of training

  // Shared with the closer, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Handed> on_time_;  // the gradient of the step the closer waits to close
  std::optional<Handed> late_;     // late.stale: a late gradient for the next step it joins
  std::deque<Closed> closed_;      // aggregates not yet applied, in step order
  int64_t joined_ = 0;             // steps < joined_ have been joined by the closer
  int64_t reached_ = 0;            // steps < reached_ the training thread has handed or skipped
  int64_t dropped_ = 0, skipped_ = 0;  // since the closer last reported them
  int64_t stale_all_ = 0, dropped_all_ = 0, skipped_all_ = 0;  // over every step joined
  bool done_ = false;              // the training thread has taken its last step
  bool stop_ = false;
  bool drained_ = false;           // every rank was done: the closer has ended
  std::exception_ptr error_;       // the closer's, for the training thread
  std::thread closer_thread_;

  StepRecord last_;
  HybridTotals totals_;
  double waited_s_ = 0;
  bool combined_ = false, skipping_ = false, ready_ = false, warned_empty_ = false;
};

}  // namespace braid::parallel::hybrid
