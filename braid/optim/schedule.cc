#include "braid/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "braid/base/error.h"

namespace braid::optim {

StepLR::StepLR(double base_lr, int64_t step_size, double gamma) : base_(base_lr), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) fail<ValueError>("StepLR: step_size must be > 0, got {}", step_size);
}

double StepLR::lr_at(int64_t step) const {
  return base_ * std::pow(gamma_, static_cast<double>(std::max<int64_t>(step, 0) / step_size_));
}

CosineLR::CosineLR(double base_lr, int64_t total_steps, double min_lr)
    : base_(base_lr), total_(total_steps), min_(min_lr) {
  if (total_steps <= 0) fail<ValueError>("CosineLR: total_steps must be > 0, got {}", total_steps);
}

double CosineLR::lr_at(int64_t step) const {
  const double t = static_cast<double>(std::clamp<int64_t>(step, 0, total_));
  return min_ + (base_ - min_) * (1 + std::cos(std::numbers::pi * t / static_cast<double>(total_))) / 2;
}

WarmupLR::WarmupLR(std::unique_ptr<LRSchedule> after, int64_t warmup_steps, double start_factor)
    : after_(std::move(after)), warmup_(warmup_steps), start_factor_(start_factor) {
  if (warmup_steps < 0) fail<ValueError>("WarmupLR: warmup_steps must be >= 0, got {}", warmup_steps);
  if (start_factor < 0 || start_factor > 1) fail<ValueError>("WarmupLR: start_factor must lie in [0, 1]");
}

double WarmupLR::lr_at(int64_t step) const {
  if (step >= warmup_) return after_->lr_at(step - warmup_);
  const double frac = static_cast<double>(step) / static_cast<double>(warmup_);
  return after_->lr_at(0) * (start_factor_ + (1 - start_factor_) * frac);
}

std::unique_ptr<LRSchedule> make_schedule(const ScheduleOptions& o) {
  std::unique_ptr<LRSchedule> s;
  if (o.name == "constant") {
    s = std::make_unique<ConstantLR>(o.base_lr);
  } else if (o.name == "step") {
    s = std::make_unique<StepLR>(o.base_lr, o.step_size, o.gamma);
  } else if (o.name == "cosine") {
    s = std::make_unique<CosineLR>(o.base_lr, std::max<int64_t>(1, o.total_steps - o.warmup_steps), o.min_lr);
  } else {
    fail<ConfigError>("unknown lr schedule '{}' (expected constant, step or cosine)", o.name);
  }
  if (o.warmup_steps > 0) s = std::make_unique<WarmupLR>(std::move(s), o.warmup_steps, o.warmup_start_factor);
  return s;
}

}  // namespace braid::optim
