// The training loop: epochs of batches from a data::Loader through
// forward -> loss -> backward -> (hooks) -> clip -> optimizer step -> lr
// schedule, with evaluation (loss, top-1/top-5), periodic checkpoints,
// resume, and a NaN/Inf guard that stops before the bad update reaches the
// weights or a checkpoint.
//
// The trainer runs on the model's device (nn::Module::device(), as the model
// is when the trainer is built: move it with Module::to first, before
// building the optimizer): each batch is copied there, figures come back to
// the host as numbers, and checkpoints hold host tensors.
#pragma once

#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/data/loader.h"
#include "braid/nn/loss.h"
#include "braid/nn/module.h"
#include "braid/optim/loss_scaler.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/schedule.h"
#include "braid/parallel/plan.h"
#include "braid/train/batch_schedule.h"
#include "braid/train/callbacks.h"
#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_async.h"
#include "braid/train/straggler.h"

namespace braid::parallel::fault_tolerance {
class ReplicaGroup;
}

namespace braid::train {

// Whether a run continues from the checkpoints in its out_dir
// (`train.resume`). A restarted group (`braid launch --max-restarts`) is a
// fresh process with the same config, so only a default that resumes keeps
// its progress; and a run that neither resumes nor refuses would overwrite
// another attempt's ckpt-100, ckpt-200 silently.
enum class Resume {
  automatic,  // "auto": the newest usable checkpoint if any, else from scratch (saying why, when some are unusable)
  never,      // from scratch; refused while out_dir holds checkpoints
  always,     // the newest usable checkpoint, else fail naming every file and why it is unusable
};
// "auto" | "never" | "always"; ConfigError naming train.resume otherwise
// (the bools it once took included: true could mean either of the others).
Resume parse_resume(const std::string& text);

struct TrainerOptions {
  int64_t epochs = 1;
  int64_t max_steps = 0;         // 0: no limit
  // The budget (epochs, max_steps) is the whole job's, all replicas' steps
  // together, rather than each replica's own (`train.budget = job`): a fast
  // replica goes on past its epochs over its shard until the replicas
  // together took W times its planned steps (Aggregation::job_steps; only
  // where replicas report to parameter servers).
  bool job_budget = false;
  double grad_clip = 0;          // max global grad norm; 0: off
  // Gradient accumulation: loader batches (micro-batches) per optimizer
  // step. Their gradients add up to the mean gradient over all their rows,
  // and a data-parallel plan combines them once per step (Plan::
  // forward_backward's `last`). An epoch's last step takes what is left.
  int64_t accumulate = 1;
  int64_t log_every = 100;       // steps between on_log records
  int64_t eval_every = 1;        // epochs between evaluations; 0: never
  // Also steps between evaluations within epochs (0: none). Plans that train
  // replicas apart evaluate the job's model where a replica holds a copy
  // (Aggregation::begin_evaluation: EASGD's center, ADMM's z), else this
  // rank's replica, not their combined model.
  int64_t eval_steps = 0;
  // The test loader reads this data rank's share of the test set
  // (Plan::evaluates_shares): evaluation sums the replicas' counts.
  bool test_shares = false;
  // Test batches an evaluation reads: its first N, the same ones each time
  // (a language model's held-out tokens may be far too many to read every
  // few hundred steps); 0: the whole test set.
  int64_t eval_batches = 0;
  // Sequence models (next-token prediction over windows of tokens): tokens
  // per example, which adds tokens/s, MFU and perplexity to the reports;
  // 0: not a sequence model.
  int64_t tokens_per_example = 0;
  // Training FLOPs of one token of the whole model (train/flops.h), for MFU;
  // 0: no MFU.
  double flops_per_token = 0;
  // Peak FLOP/s of one device in the run's precision, for MFU; 0: measured
  // once per process when training starts (measured_peak_flops).
  double peak_flops = 0;
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0: end of each epoch
  int keep_checkpoints = 3;      // older ones are deleted
  // Each rank writes its own shard, no gather (train.checkpoint_format =
  // sharded, checkpoint_manifest.h); plans whose replicas stay equal only.
  bool sharded_checkpoints = false;
  // Sharded saves are written by a background thread while training goes
  // on; the step loop pays for a copy into a staging buffer (checkpoint_async.h).
  bool checkpoint_async = true;
  // World rank 0's wait for every rank's shard of a save before its manifest.
  Duration checkpoint_timeout = std::chrono::seconds(300);
  bool checkpoints = true;       // false: never write any
  std::string out_dir{};         // checkpoints go here
  Resume resume = Resume::automatic;
  nlohmann::json config{};       // stored in every checkpoint sidecar
  // Randomness drawn during training (dropout masks); its state is saved in
  // checkpoints. Null: the trainer makes one from `seed`.
  std::shared_ptr<Generator> generator{};
  uint64_t seed = 0;
  // Grows the train loader's batch between epochs and scales the learning
  // rate with it (train/batch_schedule.h); null: the loader's batch throughout.
  std::shared_ptr<BatchSchedule> batch_schedule{};
  // Straggler simulation for benchmarks: the worker with this data rank
  // sleeps this long every step (-1: nobody).
  int straggler_rank = -1;
  double straggler_ms = 0;
  // Naming slow ranks (train/straggler.h): every `straggler.every` steps the
  // ranks share their own work per step; 0 steps: off.
  StragglerOptions straggler{};
  // Record a timeline of every rank (train/timeline.h) under out_dir.
  bool trace = false;
  // The precision linear, matmul and conv2d compute in during forward,
  // backward and evaluation: f32, or bf16/f16 products with f32 results,
  // master weights and gradients (Autocast, braid/ops/autocast.h); f16 also
  // scales the loss (optim/loss_scaler.h) and needs the model on a GPU.
  DType precision = DType::f32;
};

class Trainer {
 public:
  // `test` may be null (no evaluation).
  Trainer(std::shared_ptr<nn::Module> model, std::unique_ptr<optim::Optimizer> optimizer,
          std::unique_ptr<optim::LRSchedule> schedule, nn::LossFn loss, std::shared_ptr<data::Loader> train,
          std::shared_ptr<data::Loader> test, TrainerOptions options);

  void add_callback(std::shared_ptr<Callback> cb) { callbacks_.push_back(std::move(cb)); }
  // How the step is distributed (default: one process). Set before fit();
  // the model given to the constructor is then this rank's part of the
  // model under the plan (parallel/plan_factory.h builds both).
  // `whole_loss` scores whole outputs in evaluation when the training loss
  // works on shards (a vocabulary-parallel cross-entropy); null: the training loss.
  void set_plan(std::shared_ptr<parallel::Plan> plan, nn::LossFn whole_loss = nullptr) {
    plan_ = std::move(plan);
    if (whole_loss) eval_loss_ = std::move(whole_loss);
  }
  parallel::Plan& plan() { return *plan_; }
  // In-job recovery of data replicas (parallel.fault_tolerance = replica,
  // trainer_replicas.cc): the plan is one process's, and each step's
  // gradient is averaged over the group's current members; a replacement
  // (the group is joining) takes its state from a member instead of resuming.
  void set_replicas(std::shared_ptr<parallel::fault_tolerance::ReplicaGroup> group);

  // Runs the whole schedule (resuming first, as options.resume says). Throws
  // NumericError naming the step when the loss or gradient is not finite;
  // checkpoints written before stay valid.
  TrainSummary fit();
  // One pass over the test loader (or `loader`) in eval mode without
  // gradients. `shares`: `loader` reads this data rank's share of its set
  // (Plan::evaluates_shares), and the figures are summed over the replicas
  // (collective over the data axis).
  // `max_batches` > 0 reads only the loader's first that many batches.
  EvalMetrics evaluate();
  EvalMetrics evaluate(data::Loader& loader, bool shares = false, int64_t max_batches = 0);
  // The model's whole outputs over one pass of `loader` (eval mode, no
  // gradients, the run's precision), rows in the loader's order: [N, ...]
  // f32 on the host where the model ends, undefined on other pipeline stages. `targets`,
  // when given, receives the batches' targets [N, ...] alongside.
  Tensor predict(data::Loader& loader, Tensor* targets = nullptr);
  // The same for one batch of inputs (on any device; the outputs on the host).
  Tensor predict(const Tensor& input);
  // One training step on a batch; returns its loss, or NaN when the plan had
  // the step's update decided without this rank (Plan::step_decided: no
  // forward or backward ran). Public for tests and for
  // callers that drive their own loop.
  double train_step(const data::Batch& batch);
  // One step over several micro-batches (gradient accumulation): each one's
  // loss weighs its share of the rows, so the step follows the mean gradient
  // of all of them as one batch would; the loss returned is their mean.
  double train_step(std::span<const data::Batch> microbatches);
  // No evaluations from now on (a rank whose figures nobody reads, where the
  // plan lets it evaluate alone: Plan::evaluation_is_collective false).
  void skip_evaluations() { o_.eval_every = 0, o_.eval_steps = 0; }
  // Writes a checkpoint of the current state now; returns its stem.
  std::string save(int64_t epoch, int64_t batch_in_epoch);

  // Hyper-parameter changes between steps (population-based training):
  // the scheduled learning rate times `factor` from the next step on; the
  // train loader's batch from the next epoch on (not with a batch schedule).
  void set_lr_factor(double factor) { lr_factor_ = factor; }
  double lr_factor() const { return lr_factor_; }
  void set_batch_size(int64_t batch_size);
  // Takes the model's and optimizer's state of a checkpoint (another run's
  // weights); position, randomness and schedule stay this run's.
  void load_state(const Checkpoint& checkpoint);

  nn::Module& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  // Where the model lives and every batch is copied to.
  Device device() const { return device_; }
  Generator& generator() { return *gen_; }
  int64_t step() const { return step_; }

 private:
  // Restores the latest good checkpoint as options.resume says; returns
  // (epoch, batch) to continue from, (0, 0) for a fresh start.
  std::pair<int64_t, int64_t> resume();
  // The plan's setup, once, before the first step or evaluation.
  void setup_plan();
  // Where this rank's checkpoints go (a sub-folder per shard of a sharded model).
  std::string checkpoint_dir() const;
  // A save in the sharded format (options.sharded_checkpoints).
  std::string save_sharded(int64_t epoch, int64_t batch_in_epoch);
  // ConfigError when the sharded format is asked of a plan whose replicas
  // train apart.
  void check_sharded_plan() const;
  // Reports the sharded saves finished since the last call (`wait`: the one
  // in flight too): on_checkpoint for each written one, a message for each
  // that failed (training goes on from the previous complete checkpoint).
  void report_saves(bool wait);
  void log(const StepMetrics& m);
  // The train loader's batch for `epoch`: set_batch_size's, then the
  // batch-size schedule's (no change without either).
  void set_epoch_batch(int64_t epoch);
  // Optimizer steps from `epoch` (its first `skip` batches already taken) to
  // the end, by the batches planned for each epoch.
  int64_t planned_steps(int64_t epoch, int64_t skip) const;
  // Optimizer steps that take `batches` loader batches (accumulate per step).
  int64_t steps_for(int64_t batches) const { return (batches + o_.accumulate - 1) / o_.accumulate; }
  // Tokens/s of the whole job and MFU for a window of `examples` rows
  // trained in `seconds` on this rank (sequence models; else zeros).
  std::pair<double, double> token_rates(int64_t examples, double seconds);

  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  nn::LossFn loss_, eval_loss_;
  std::shared_ptr<data::Loader> train_, test_;
  TrainerOptions o_;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::shared_ptr<parallel::Plan> plan_;
  bool plan_ready_ = false;
  std::shared_ptr<Generator> gen_;
  int64_t step_ = 0;
  // train.budget = job (fit() sets it): where the count of every replica's
  // steps started, where it ends, and the job's progress in one replica's
  // steps, which the learning-rate schedule follows.
  struct JobCount {
    int64_t counted_at_start = 0, step_at_start = 0, replicas = 1, end = 0;
    int64_t replica_steps(int64_t counted) const { return step_at_start + (counted - counted_at_start) / replicas; }
  };
  std::optional<JobCount> job_;
  double lr_factor_ = 1;
  int64_t next_batch_size_ = 0;  // set_batch_size's, until the next epoch
  int64_t epoch_ = 0, batch_ = 0;  // position, for checkpoints and error messages
  // Seconds the last train_step spent combining gradients (waiting for peers):
  // a step's own work is its time minus this.
  double last_sync_s_ = 0;
  // The last step's host memory peaks (StepMetrics::peak_activation_bytes).
  int64_t last_peak_activation_ = 0, last_peak_tensor_ = 0;
  // After a step of `step_s` seconds: feeds the straggler watch and, when its
  // window closes, shares the figures and reports the ranks it names.
  void watch_stragglers(StragglerWatch& watch, double step_s);
  // parallel.fault_tolerance = replica (trainer_replicas.cc): the gradient's
  // average over the members (false: a member ahead sent its state, which
  // was loaded, so this step is applied already); the state a member sends
  // and loads; the step boundary, where replacements are admitted.
  std::shared_ptr<parallel::fault_tolerance::ReplicaGroup> replicas_;
  bool average_over_replicas();
  std::vector<std::byte> replica_state() const;
  void load_replica_state(std::span<const std::byte> bytes);
  void at_replica_boundary(int64_t epoch, int64_t batch);
  // A replacement's start: admitted, the state loaded; returns (epoch, batch),
  // or nothing when the members finished first.
  std::optional<std::pair<int64_t, int64_t>> join_replicas();
  std::vector<float> replica_grad_;  // the flat gradient, reused
  std::vector<Tensor> params_;
  Device device_ = Device::cpu;
  double peak_flops_ = 0;  // one device's, for MFU: options.peak_flops or measured in fit()
  std::optional<optim::LossScaler> scaler_;  // precision f16
  std::string last_checkpoint_;
  // Sharded saves: the background writer, and the id the job's ranks agree on
  // at start so that an earlier attempt's files of the same step never pass
  // for this save's.
  std::unique_ptr<ShardWriter> writer_;
  std::string save_session_;
  // Names the run in its checkpoints (every rank's, every step's, kept
  // across resumes), so shards of different runs are never merged.
  std::string run_id_;
};

// Fraction of rows whose target is the top-1 / among the top-5 logits.
// logits [N, C] (or [..., C]), targets i64 [N] (or [...]).
struct TopK {
  int64_t top1 = 0, top5 = 0, n = 0;
};
TopK count_topk(const Tensor& logits, const Tensor& targets);

}  // namespace braid::train
