// One pipeline stage's step (docs/design.md, "parallel"): a StepSchedule that
// runs this rank's slice of the model over the step's micro-batches in the
// order of a schedule (schedule.h), receiving activations from the previous
// stage and gradients from the next one.
//
// Micro-batch i of a batch of N rows has n_i rows (parallel/step_schedule.h,
// microbatch_rows) and its loss is weighted by n_i / N, so the gradients the
// stages accumulate are the whole batch's mean gradient. The data axis is
// told to communicate only during the step's last backward. Activation
// recompute is the blocks' own (nn/recompute.h, set by the plan on the whole
// model), the same under a pipeline as without one.
//
// Interleaved: the rank's model is an nn::Sequential of its V chunks (rank p
// of P holds virtual stages p, p + P, ...), chunk c starting at layer
// chunk_starts[c]; virtual stage v sends to v + 1, which is the next rank,
// or rank 0's next chunk after the last rank. Zero bubble: a backward action
// computes the gradients of the activations only (autograd/deferred.h) and
// the weight action, later, the parameters'.
#pragma once

#include <chrono>
#include <deque>

#include "braid/autograd/deferred.h"
#include "braid/comm/communicator.h"
#include "braid/parallel/pipeline/p2p_tensor.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/step_schedule.h"

namespace braid::parallel::pipeline {

struct StageOptions {
  Schedule schedule = Schedule::one_f_one_b;
  int microbatches = 1;
  // Interleaved: the first layer of each of this rank's chunks in its
  // Sequential (chunk_starts[0] = 0); empty: one chunk, the whole model.
  std::vector<int> chunk_starts{};
  Duration timeout = std::chrono::seconds(300);
};

class Stage final : public StepSchedule {
 public:
  // `pipe`: the pipeline axis; its rank is this stage, its size the stages.
  Stage(comm::Communicator pipe, StageOptions options);
  std::string name() const override;
  double run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
             const std::function<void(bool)>& set_sync) override;
  Tensor evaluate(nn::Module& model, const Tensor& input) override;
  bool ends_model() const override { return stage_ + 1 == stages_; }
  // {"busy_ms": compute time of the last step, "step_ms": its wall time,
  //  "max_live_microbatches": activations held at most (micro-batch chunks
  //  with interleaving), "order": "F0 F1 B0 ..."}
  nlohmann::json stats() const override;

  // The actions the last step ran, in order (tests compare with the schedule).
  const std::vector<Action>& last_order() const { return ran_; }
  int last_max_live() const { return max_live_; }

 private:
  struct Micro {
    Tensor input;           // what the stage's forward took (requires grad past virtual stage 0)
    Tensor output;          // forward result (the loss on the last stage)
    Tensor target;          // last stage
    double share = 0;       // n_i / N
    autograd::DeferredWeightGrads weights;  // zero bubble: W, between B and W
  };
  int chunks() const { return o_.chunk_starts.empty() ? 1 : static_cast<int>(o_.chunk_starts.size()); }
  // Whether chunk c of this rank is the model's first or last virtual stage.
  bool starts_model(int c) const { return stage_ == 0 && c == 0; }
  bool ends_chunks(int c) const { return stage_ + 1 == stages_ && c + 1 == chunks(); }
  Tensor run_chunk(nn::Module& model, int c, const Tensor& x) const;
  void forward(nn::Module& model, const nn::LossFn& loss, Micro& m, const Action& a);
  void backward(Micro& m, const Action& a);
  void weight(Micro& m, const Action& a);
  Tensor receive(uint64_t tag, int from, const std::string& what);
  void send(const Tensor& t, int to, uint64_t tag);
  void drain_sends();
  [[noreturn]] void fail_wait(const std::string& what, const Error& e) const;

  comm::Communicator pipe_;
  StageOptions o_;
  int stage_, stages_;
  Device device_ = Device::cpu;  // where received activations and gradients land: the step's batch's device
  std::deque<TensorSend> sends_;
  std::vector<Action> ran_;
  int live_ = 0, max_live_ = 0;
  double busy_ms_ = 0, step_ms_ = 0;
  double loss_sum_ = 0;
};

}  // namespace braid::parallel::pipeline
