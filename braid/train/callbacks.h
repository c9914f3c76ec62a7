// What the trainer reports, and Callback, the observers of it (metrics files,
// progress display). Distribution plugs into the step through
// parallel::Plan (braid/parallel/plan.h), not here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace braid::nn {
class Module;
}
namespace braid::optim {
class Optimizer;
}

namespace braid::train {

struct StragglerReport;  // train/straggler.h

struct StepMetrics {
  int64_t step = 0;                // optimizer steps taken (after this one)
  int64_t epoch = 0;               // 0-based
  int64_t batch = 0;               // batches of this epoch consumed
  int64_t batches_per_epoch = 0;
  int64_t total_steps = 0;         // planned steps of the whole run
  // Mean training loss over the steps since the last record that computed
  // one; NaN when none did (a timeout-hybrid worker that caught up by
  // applying decided updates, train/trainer.h).
  double loss = 0;
  double lr = 0;
  double samples_per_s = 0;        // training throughput over the same window
  double step_ms = 0;              // mean wall time of one step in the window
  int64_t examples = 0;            // examples in the window (on_step: this step's batch)
  // Sequence models (TrainerOptions::tokens_per_example), else 0: the whole
  // job's tokens per second over the window, and the model FLOPs
  // utilisation (train/flops.h; 0 when no FLOPs figure is known).
  double tokens_per_s = 0;
  double mfu = 0;
  // Gradient codec figures of the window (CodecStats::to_json: raw_bytes,
  // wire_bytes, ratio, encode_ms, decode_ms, calls); empty without a codec.
  nlohmann::json codec = nlohmann::json::object();
  // Host memory of the window's steps at their highest (0 on other devices;
  // docs/memory.md): activation bytes are the allocator's `other` category
  // (activations, their gradients, temporaries, communication buffers) above
  // what was in use when the step began; tensor bytes every block held.
  int64_t peak_activation_bytes = 0;
  int64_t peak_tensor_bytes = 0;
};

struct EvalMetrics {
  int64_t step = 0;
  int64_t epoch = 0;
  bool within_epoch = false;  // taken every train.eval_steps, not at an epoch's end
  double loss = 0;   // mean over examples
  double top1 = 0;   // fraction in [0, 1]
  double top5 = 0;
  // Sequence models: exp(loss), the loss being the mean over every
  // predicted token; 0 for other models.
  double perplexity = 0;
  int64_t examples = 0;
  double seconds = 0;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs = 0;
  double train_seconds = 0;       // time in training steps (evaluation excluded)
  double samples_per_s = 0;       // training examples / train_seconds
  double final_loss = 0;          // mean training loss of the last epoch
  double tokens_per_s = 0, mfu = 0;  // sequence models, over train_seconds (StepMetrics)
  bool has_eval = false;
  EvalMetrics last_eval;
  std::string last_checkpoint;    // stem of the last checkpoint written, if any
};

// Observers; every method has a do-nothing default, override what you need.
class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(int64_t /*start_step*/, int64_t /*total_steps*/) {}
  // After every step (cheap: progress bars redraw from here).
  virtual void on_step(const StepMetrics& /*m*/) {}
  // Every train.log_every steps and at the end of each epoch.
  virtual void on_log(const StepMetrics& /*m*/) {}
  virtual void on_eval(const EvalMetrics& /*m*/) {}
  virtual void on_checkpoint(const std::string& /*stem*/, int64_t /*step*/) {}
  // Free-form notes for the user (resume, skipped checkpoints).
  virtual void on_message(const std::string& /*text*/) {}
  // A rank persistently slower than the others (world rank 0 of the job reports).
  virtual void on_straggler(const StragglerReport& /*r*/) {}
  // The data replicas' membership changed (parallel.fault_tolerance =
  // replica): {"epoch", "step", "members", "left", "joined", "seconds", ...}.
  virtual void on_membership(const nlohmann::json& /*change*/) {}
  virtual void on_train_end(const TrainSummary& /*s*/) {}
};

}  // namespace braid::train
