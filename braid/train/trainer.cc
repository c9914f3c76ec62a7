// Trainer: construction, the training step and the fit loop (trainer.h);
// evaluation in trainer_eval.cc, checkpoints in trainer_checkpoint.cc.
#include "braid/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "braid/base/deadline.h"
#include "braid/base/log.h"
#include "braid/ops/autocast.h"
#include "braid/ops/elementwise.h"
#include "braid/optim/clip.h"
#include "braid/parallel/fault_tolerance/replica_group.h"
#include "braid/tensor/allocator.h"
#include "braid/train/flops.h"
#include "braid/train/timeline.h"

namespace braid::train {

Trainer::Trainer(std::shared_ptr<nn::Module> model, std::unique_ptr<optim::Optimizer> optimizer,
                 std::unique_ptr<optim::LRSchedule> schedule, nn::LossFn loss, std::shared_ptr<data::Loader> train,
                 std::shared_ptr<data::Loader> test, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      schedule_(std::move(schedule)),
      loss_(std::move(loss)),
      eval_loss_(loss_),
      train_(std::move(train)),
      test_(std::move(test)),
      o_(std::move(options)),
      plan_(std::make_shared<parallel::Plan>()),
      gen_(o_.generator ? o_.generator : std::make_shared<Generator>(o_.seed, /*stream=*/1)) {
  std::random_device entropy;
  run_id_ = fmt::format("{:08x}{:08x}", entropy(), entropy());
  if (!model_ || !optimizer_ || !loss_ || !train_) fail<ValueError>("Trainer: model, optimizer, loss and train loader are required");
  if (!schedule_) schedule_ = std::make_unique<optim::ConstantLR>(optimizer_->lr());
  if (o_.epochs < 1) fail<ValueError>("Trainer: epochs must be >= 1, got {}", o_.epochs);
  if (o_.log_every < 1) fail<ValueError>("Trainer: log_every must be >= 1, got {}", o_.log_every);
  if (o_.eval_steps < 0) fail<ValueError>("Trainer: eval_steps must be >= 0, got {}", o_.eval_steps);
  if (o_.accumulate < 1) fail<ValueError>("Trainer: accumulate must be >= 1, got {}", o_.accumulate);
  if (o_.eval_batches < 0) fail<ValueError>("Trainer: eval_batches must be >= 0, got {}", o_.eval_batches);
  if (o_.tokens_per_example < 0 || o_.flops_per_token < 0 || o_.peak_flops < 0) {
    fail<ValueError>("Trainer: tokens_per_example, flops_per_token and peak_flops must be >= 0");
  }
  if (o_.checkpoints && o_.out_dir.empty()) fail<ValueError>("Trainer: checkpoints need an out_dir");
  if (o_.precision != DType::f32 && o_.precision != DType::bf16 && o_.precision != DType::f16) {
    fail<ValueError>("Trainer: precision must be f32, bf16 or f16, got {}", name(o_.precision));
  }
  params_ = model_->parameters();
  device_ = model_->device();
  if (o_.precision == DType::f16) {
    if (device_.is_cpu()) fail<ValueError>("Trainer: precision f16 needs the model on a GPU (train.device = cuda); use bf16 on the CPU");
    scaler_.emplace();
  }
}

double Trainer::train_step(const data::Batch& batch) { return train_step(std::span<const data::Batch>(&batch, 1)); }

double Trainer::train_step(std::span<const data::Batch> micro) {
  if (micro.empty()) fail<ValueError>("Trainer::train_step: a step needs at least one batch");
  setup_plan();
  BatchSchedule* bs = o_.batch_schedule.get();
  const int64_t at = job_ ? job_->replica_steps(*plan_->job_steps()) : step_;
  optimizer_->set_lr(lr_factor_ *
                     (bs ? schedule_->lr_at(bs->schedule_step()) * bs->lr_factor() : schedule_->lr_at(at)));
  optimizer_->zero_grad(/*set_to_none=*/false);  // keeps .grad buffers (and a plan's bucket views)
  int64_t rows = 0;
  for (const data::Batch& b : micro) rows += b.size();
  // A step already decided without this rank (a timeout-hybrid worker catching
  // up) has no forward, backward or loss: the update is applied below.
  const bool decided = plan_->step_decided();
  double value = std::numeric_limits<double>::quiet_NaN();
  // The step's peak activation memory: the allocator's `other` bytes above
  // what is in use now, through forward, backward and gradient sync.
  CachingAllocator& memory = CachingAllocator::host();
  memory.reset_peak();
  const size_t other_before = memory.stats()[MemoryCategory::other].in_use;
  if (!decided) {
    Autocast autocast(o_.precision);
    // Loaders fill host tensors; the step runs where the model is. Under f16
    // the loss is scaled so that small gradients survive f16 (and unscaled
    // below, after the gradients are synchronised: sums commute with it).
    const nn::LossFn loss = scaler_ ? nn::LossFn([this](const Tensor& o, const Tensor& y) { return scaler_->scale(loss_(o, y)); })
                                    : loss_;
    value = 0;
    for (size_t i = 0; i < micro.size(); ++i) {
      const data::Batch& b = micro[i];
      // Each micro-batch's mean loss weighs its share of the step's rows, so
      // the gradients add up to the mean over all of them.
      const double share = static_cast<double>(b.size()) / static_cast<double>(rows);
      const nn::LossFn part = micro.size() == 1 ? loss : nn::LossFn([&loss, share](const Tensor& o, const Tensor& y) {
        return mul(loss(o, y), share);
      });
      value += plan_->forward_backward(*model_, part, b.input.to(device_), b.target.to(device_),
                                       /*last=*/i + 1 == micro.size());
    }
    if (scaler_) value /= scaler_->scale();
  }
  if (!decided && !std::isfinite(value)) {
    fail<NumericError>("loss is {} at step {} (epoch {}, batch {}); stopped before updating the weights{}", value,
                       step_ + 1, epoch_ + 1, batch_ + 1,
                       last_checkpoint_.empty() ? "" : "; last good checkpoint: " + last_checkpoint_);
  }
  if (!decided && o_.straggler_ms > 0 && plan_->data_rank() == o_.straggler_rank) {  // stands for slow compute
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o_.straggler_ms));
  }
  {
    const auto t_sync = Clock::now();
    trace::Span span("step", "gradient sync");
    plan_->finish_gradients();
    // A member ahead sent its state (this step applied there): nothing to update.
    if (replicas_ && !average_over_replicas()) return value;
    last_sync_s_ = seconds_since(t_sync);
  }
  if (device_.is_cpu()) {
    const AllocatorStats st = memory.stats();
    last_peak_activation_ = static_cast<int64_t>(st[MemoryCategory::other].peak - other_before);
    last_peak_tensor_ = static_cast<int64_t>(st.peak_bytes_in_use);
  }
  // An overflowed f16 step is skipped by every rank alike (their shards differ).
  bool skip = false;
  if (scaler_) {
    const bool found_inf = scaler_->unscale_gradients_and_check(plan_->gradients());
    const std::vector<double> flags = plan_->gather_world(found_inf ? 1.0 : 0.0);
    skip = std::any_of(flags.begin(), flags.end(), [](double f) { return f != 0; });
  }
  if (skip) {
    scaler_->update(true);
    plan_->after_step();
    ++step_;
    if (bs) bs->count(rows);
    return value;
  }
  if (bs && bs->observes_gradients() && !decided) {
    bs->noise().observe(plan_->gradients(), rows * plan_->data_world(),
                        [this](const std::vector<Tensor>& t) { return plan_->sum_squares(t); });
  }
  if (o_.grad_clip > 0) {
    const double norm = plan_->clip_grad_norm(o_.grad_clip);
    if (!std::isfinite(norm)) {
      fail<NumericError>("gradient norm is {} at step {} (epoch {}, batch {}); stopped before updating the weights{}",
                         norm, step_ + 1, epoch_ + 1, batch_ + 1,
                         last_checkpoint_.empty() ? "" : "; last good checkpoint: " + last_checkpoint_);
    }
  }
  {
    trace::Span span("step", "optimizer");
    if (plan_->owns_optimizer()) {
      plan_->step(optimizer_->lr());
    } else {
      optimizer_->step();
    }
    plan_->after_step();
  }
  if (scaler_) scaler_->update(false);
  ++step_;
  if (bs) bs->count(rows);
  return value;
}

void Trainer::set_batch_size(int64_t batch_size) {
  if (o_.batch_schedule) fail<ValueError>("Trainer::set_batch_size: a batch-size schedule sets the batch");
  if (batch_size < 1) fail<ValueError>("Trainer::set_batch_size: batch size must be >= 1, got {}", batch_size);
  next_batch_size_ = batch_size;
}

void Trainer::load_state(const Checkpoint& c) {
  plan_->load_model_state(*model_, c.model);
  plan_->load_optimizer_state(*optimizer_, c.optimizer);
}

void Trainer::set_epoch_batch(int64_t epoch) {
  if (next_batch_size_ > 0) {
    train_->set_batch_size(next_batch_size_);
    next_batch_size_ = 0;
  }
  if (!o_.batch_schedule) return;
  const std::string change =
      o_.batch_schedule->start_epoch(epoch, [this](std::vector<double>& v) { plan_->agree(v); });
  train_->set_batch_size(o_.batch_schedule->batch());
  if (!change.empty()) {
    for (auto& cb : callbacks_) cb->on_message(change);
  }
}

int64_t Trainer::planned_steps(int64_t epoch, int64_t skip) const {
  const int64_t examples = train_->examples_per_epoch();
  int64_t steps = 0;
  for (int64_t e = epoch; e < o_.epochs; ++e) {
    int64_t batches = train_->batches_per_epoch();
    if (o_.batch_schedule) {
      const int64_t b = o_.batch_schedule->planned_batch(e);
      batches = (examples + b - 1) / b;
    }
    steps += steps_for(batches - (e == epoch ? skip : 0));
  }
  return steps;
}

std::pair<double, double> Trainer::token_rates(int64_t examples, double seconds) {
  if (o_.tokens_per_example <= 0 || seconds <= 0) return {0.0, 0.0};
  // Every data replica trains as many rows; the tensor and pipeline ranks of
  // a replica share its rows, and their devices count towards the peak.
  const double tokens = static_cast<double>(examples) * static_cast<double>(o_.tokens_per_example) *
                        static_cast<double>(plan_->data_world());
  const double per_s = tokens / seconds;
  const double devices = static_cast<double>(plan_->data_world()) * plan_->mesh().degree(parallel::Axis::tensor) *
                         plan_->mesh().degree(parallel::Axis::pipeline);
  const double achieved = per_s * o_.flops_per_token / devices;  // FLOP/s of one device
  if (o_.flops_per_token > 0 && o_.peak_flops <= 0 && achieved > peak_flops_) {
    // The peak was measured while other work shared the cores: measure it
    // again, and never report a device doing more than its peak.
    const double before = peak_flops_;
    peak_flops_ = std::max(measured_peak_flops(device_, o_.precision, /*refresh=*/true), achieved);
    logging::info("MFU's peak measured again: {:.1f} GFLOP/s a device (was {:.1f}, measured under load)",
                  peak_flops_ / 1e9, before / 1e9);
  }
  const double mfu = o_.flops_per_token > 0 && peak_flops_ > 0 ? achieved / peak_flops_ : 0;
  return {per_s, mfu};
}

void Trainer::setup_plan() {
  if (plan_ready_) return;
  plan_ready_ = true;
  plan_->setup(*model_, o_.config, optimizer_.get());
}

void Trainer::watch_stragglers(StragglerWatch& watch, double step_s) {
  watch.add(1e3 * std::max(0.0, step_s - last_sync_s_));
  if (!watch.due(step_)) return;
  // Collective over the ranks that train in step (Plan::gather_world): every
  // rank reaches the same step, so every rank takes part.
  const std::vector<double> all = plan_->gather_world(watch.mean_ms());
  for (const StragglerReport& r : watch.judge(step_, all)) {
    if (auto* rec = trace::active()) rec->instant("straggler", r.message(), r.to_json());
    if (plan_->world_rank() != 0) continue;
    for (auto& cb : callbacks_) {
      cb->on_straggler(r);
      cb->on_message(r.message());
    }
  }
}

void Trainer::log(const StepMetrics& m) {
  for (auto& cb : callbacks_) cb->on_log(m);
}

TrainSummary Trainer::fit() {
  // Every rank's spans from here on, when train.trace is set (train/timeline.h).
  Timeline timeline(o_.trace ? o_.out_dir : "", plan_->world_rank());
  StragglerWatch stragglers(o_.straggler);
  run_id_ = plan_->agree_on_run_id(run_id_);
  // A replacement replica takes the members' state from one of them, not from disk.
  std::pair<int64_t, int64_t> start;
  if (replicas_ && replicas_->needs_join()) {
    const auto joined = join_replicas();
    if (!joined) return TrainSummary{};  // the members finished first: nothing to train
    start = *joined;
  } else {
    start = resume();
  }
  auto [start_epoch, start_batch] = start;
  setup_plan();
  set_epoch_batch(start_epoch);
  int64_t per_epoch = train_->batches_per_epoch();
  // Re-planned at each epoch when a batch-size schedule may grow the batch.
  auto plan_total = [&](int64_t epoch, int64_t skip) {
    const int64_t planned = step_ + planned_steps(epoch, skip);
    return o_.max_steps > 0 ? std::min(planned, o_.max_steps) : planned;
  };
  int64_t total_steps = plan_total(start_epoch, start_batch);
  // A run that trains nothing and exits 0 looks like success (a batch larger
  // than the data set made 0 batches an epoch, and the loss printed nan).
  if (!o_.job_budget && total_steps <= step_) {
    if (step_ == 0) {
      fail<ConfigError>("this run has no step to train: {} batches per epoch of {} examples, train.epochs = {}, "
                        "train.max_steps = {}", per_epoch, train_->examples_per_epoch(), o_.epochs, o_.max_steps);
    }
    for (auto& cb : callbacks_) {
      cb->on_message(fmt::format("resumed at step {}, where the schedule ends ({} steps): nothing left to train",
                                 step_, total_steps));
    }
  }
  if (plan_->mesh().size() > 1 || plan_->data_world() > 1) {
    for (auto& cb : callbacks_) cb->on_message("plan: " + plan_->describe());
  }
  // A job-wide budget ends at a count of every replica's steps together; a
  // resumed job counts on from what the servers hold now.
  if (o_.job_budget) {
    const std::optional<int64_t> counted = plan_->job_steps();
    if (!counted) {
      fail<ConfigError>("train.budget = job needs replicas that count their steps together on parameter servers "
                        "(parallel.strategy = ps, or easgd / admm with mode = async); this plan is {}",
                        plan_->describe());
    }
    JobCount& j = job_.emplace();
    j.counted_at_start = step_ > 0 ? *counted : 0;
    j.step_at_start = step_;
    j.replicas = plan_->data_world();
    j.end = j.counted_at_start + (total_steps - step_) * j.replicas;
    for (auto& cb : callbacks_) {
      cb->on_message(fmt::format("budget: {} steps over all {} replicas together (train.budget = job)", j.end,
                                 j.replicas));
    }
  }
  const auto budget_spent = [&] { return job_ ? *plan_->job_steps() >= job_->end : step_ >= total_steps; };
  // MFU's denominator, measured before the first step (a quarter of a
  // second, once per process) unless given.
  if (o_.tokens_per_example > 0 && o_.flops_per_token > 0) {
    peak_flops_ = o_.peak_flops > 0 ? o_.peak_flops : measured_peak_flops(device_, o_.precision);
  }
  model_->train();
  for (auto& cb : callbacks_) cb->on_train_begin(step_, total_steps);

  TrainSummary s;
  double window_loss = 0, epoch_loss = 0;
  int64_t window_steps = 0, window_samples = 0, samples = 0;
  int64_t window_losses = 0, epoch_losses = 0;  // steps that computed a loss (not decided without this rank)
  const auto mean = [](double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : std::nan(""); };
  double train_seconds = 0, window_seconds = 0;
  int64_t window_peak_activation = 0, window_peak_tensor = 0;
  auto record = [&](int64_t epoch, int64_t batch) {
    const auto [tokens_per_s, mfu] = token_rates(window_samples, window_seconds);
    StepMetrics m{.step = step_, .epoch = epoch, .batch = batch, .batches_per_epoch = per_epoch,
                  .total_steps = total_steps, .loss = mean(window_loss, window_losses),
                  .lr = optimizer_->lr(),
                  .samples_per_s = window_seconds > 0 ? static_cast<double>(window_samples) / window_seconds : 0,
                  .step_ms = 1e3 * window_seconds / static_cast<double>(std::max<int64_t>(window_steps, 1)),
                  .examples = window_samples, .tokens_per_s = tokens_per_s, .mfu = mfu,
                  .codec = plan_->take_codec_stats(), .peak_activation_bytes = window_peak_activation,
                  .peak_tensor_bytes = window_peak_tensor};
    log(m);
    window_loss = 0, window_steps = 0, window_losses = 0, window_samples = 0, window_seconds = 0;
    window_peak_activation = 0, window_peak_tensor = 0;
  };
  bool done = budget_spent();
  // Under a job-wide budget a replica's epochs go on until the job's count is spent.
  for (int64_t epoch = start_epoch; (o_.job_budget || epoch < o_.epochs) && !done; ++epoch) {
    epoch_ = epoch;
    if (epoch != start_epoch) {
      set_epoch_batch(epoch);
      per_epoch = train_->batches_per_epoch();
      if (epoch < o_.epochs) total_steps = plan_total(epoch, 0);
    }
    train_->start_epoch(epoch);
    int64_t batch = 0;
    if (epoch == start_epoch) {
      for (; batch < start_batch && train_->next(); ++batch) {}  // the resumed epoch's consumed batches
    }
    epoch_loss = 0, epoch_losses = 0;
    auto t_batch = Clock::now();
    std::vector<data::Batch> micro;  // one step's batches (train.accumulate)
    while (true) {
      micro.clear();
      {
        trace::Span span("step", "data");
        while (static_cast<int64_t>(micro.size()) < o_.accumulate) {
          std::optional<data::Batch> b = train_->next();
          if (!b) break;
          micro.push_back(std::move(*b));
        }
      }
      if (micro.empty()) break;
      batch_ = batch;
      double loss;
      {
        trace::Span span("step", "step");
        if (span) span.arg("step", step_ + 1);
        loss = train_step(micro);
      }
      batch += static_cast<int64_t>(micro.size());
      if (replicas_) at_replica_boundary(epoch, batch);
      int64_t rows = 0;
      for (const data::Batch& b : micro) rows += b.size();
      const double dt = seconds_since(t_batch);
      watch_stragglers(stragglers, dt);
      train_seconds += dt, window_seconds += dt;
      if (!std::isnan(loss)) window_loss += loss, epoch_loss += loss, ++window_losses, ++epoch_losses;
      ++window_steps;
      window_samples += rows, samples += rows;
      window_peak_activation = std::max(window_peak_activation, last_peak_activation_);
      window_peak_tensor = std::max(window_peak_tensor, last_peak_tensor_);
      const auto [tokens_per_s, mfu] = token_rates(rows, dt);
      StepMetrics m{.step = step_, .epoch = epoch, .batch = batch, .batches_per_epoch = per_epoch,
                    .total_steps = total_steps, .loss = loss, .lr = optimizer_->lr(),
                    .samples_per_s = dt > 0 ? static_cast<double>(rows) / dt : 0, .step_ms = 1e3 * dt,
                    .examples = rows, .tokens_per_s = tokens_per_s, .mfu = mfu,
                    .peak_activation_bytes = last_peak_activation_, .peak_tensor_bytes = last_peak_tensor_};
      for (auto& cb : callbacks_) cb->on_step(m);
      if (step_ % o_.log_every == 0) record(epoch, batch);
      done = budget_spent();
      if (o_.checkpoints && o_.checkpoint_every > 0 && step_ % o_.checkpoint_every == 0) {
        save(batch == per_epoch ? epoch + 1 : epoch, batch == per_epoch ? 0 : batch);
      }
      if (done) break;
      if (test_ && o_.eval_steps > 0 && step_ % o_.eval_steps == 0 && batch < per_epoch) {
        EvalMetrics e = evaluate();
        e.within_epoch = true;
        for (auto& cb : callbacks_) cb->on_eval(e);
      }
      t_batch = Clock::now();
    }
    if (window_steps > 0) record(epoch, batch);
    const bool last = done || (!o_.job_budget && epoch + 1 == o_.epochs);
    if (last) plan_->finish();
    const bool epoch_complete = batch == per_epoch;
    if (o_.checkpoints && o_.checkpoint_every == 0) {
      save(epoch_complete ? epoch + 1 : epoch, epoch_complete ? 0 : batch);
    }
    if (test_ && o_.eval_every > 0 && ((epoch + 1) % o_.eval_every == 0 || last)) {
      s.last_eval = evaluate();
      s.has_eval = true;
      for (auto& cb : callbacks_) cb->on_eval(s.last_eval);
    }
    s.epochs = epoch + 1;
  }
  plan_->finish();  // (again is a no-op; a resumed run may have had no step left)
  if (const std::string r = plan_->report(); !r.empty()) {
    for (auto& cb : callbacks_) cb->on_message(r);
  }
  s.steps = step_;
  s.train_seconds = train_seconds;
  s.samples_per_s = train_seconds > 0 ? static_cast<double>(samples) / train_seconds : 0;
  std::tie(s.tokens_per_s, s.mfu) = token_rates(samples, train_seconds);
  s.final_loss = mean(epoch_loss, epoch_losses);
  report_saves(/*wait=*/true);  // the last sharded save is written before fit returns
  s.last_checkpoint = last_checkpoint_;
  if (replicas_) replicas_->finish();  // a replacement still waiting stops
  const std::string merged = timeline.close([this] { plan_->gather_world(0); });
  if (!merged.empty()) {
    for (auto& cb : callbacks_) cb->on_message("timeline: " + merged + " (open it in Perfetto or chrome://tracing)");
  }
  for (auto& cb : callbacks_) cb->on_train_end(s);
  return s;
}

}  // namespace braid::train
