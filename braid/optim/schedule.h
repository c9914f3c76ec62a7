// Learning-rate schedules: pure functions of the optimizer step, so resuming
// from a checkpoint needs nothing but the step count. Step t counts updates
// already taken (the first update uses lr_at(0)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace braid::optim {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
};

// base_lr throughout.
class ConstantLR final : public LRSchedule {
 public:
  explicit ConstantLR(double base_lr) : base_(base_lr) {}
  double lr_at(int64_t) const override { return base_; }

 private:
  double base_;
};

// base_lr * gamma^floor(step / step_size)   (torch StepLR, stepped per update).
class StepLR final : public LRSchedule {
 public:
  StepLR(double base_lr, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;

 private:
  double base_;
  int64_t step_size_;
  double gamma_;
};

// min_lr + (base_lr - min_lr) * (1 + cos(pi * min(step, total) / total)) / 2
// (the closed form of torch CosineAnnealingLR; stays at min_lr after `total`).
class CosineLR final : public LRSchedule {
 public:
  CosineLR(double base_lr, int64_t total_steps, double min_lr = 0);
  double lr_at(int64_t step) const override;

 private:
  double base_;
  int64_t total_;
  double min_;
};

// Linear warmup (Goyal et al., 2017): for step < warmup the lr rises linearly
// from start_factor * after(0) towards after(0); from step = warmup on it is
// after(step - warmup), i.e. the wrapped schedule starts when warmup ends.
class WarmupLR final : public LRSchedule {
 public:
  WarmupLR(std::unique_ptr<LRSchedule> after, int64_t warmup_steps, double start_factor = 0.0);
  double lr_at(int64_t step) const override;

 private:
  std::unique_ptr<LRSchedule> after_;
  int64_t warmup_;
  double start_factor_;
};

struct ScheduleOptions {
  std::string name = "constant";  // constant | step | cosine
  double base_lr = 0.01;
  int64_t total_steps = 0;        // cosine: steps to decay over (after warmup)
  int64_t step_size = 1000;       // step: updates between decays
  double gamma = 0.1;             // step: decay factor
  double min_lr = 0;              // cosine: final lr
  int64_t warmup_steps = 0;       // 0: no warmup
  double warmup_start_factor = 0;
};

// Builds a schedule by name; ConfigError for an unknown name.
std::unique_ptr<LRSchedule> make_schedule(const ScheduleOptions& options);

}  // namespace braid::optim
