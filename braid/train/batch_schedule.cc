#include "braid/train/batch_schedule.h"

#include <cmath>
#include <limits>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/optim/optimizer.h"

namespace braid::train {

NoiseScale::NoiseScale(int64_t window) : window_(window) {
  if (window < 2) fail<ConfigError>("train.noise_window must be >= 2 (two batch sizes are compared), got {}", window);
}

void NoiseScale::observe(const std::vector<Tensor>& gradients, int64_t batch, const SumSquares& sum_squares) {
  if (batch != batch_ || sum_.size() != gradients.size()) {
    steps_ = 0;
    batch_ = batch;
    sum_.assign(gradients.size(), Tensor());
  }
  if (steps_ == 0) sq_sum_ = 0;
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& g = gradients[i];
    if (!g.defined()) continue;
    if (g.dtype() != DType::f32 || !g.is_contiguous()) fail<ValueError>("NoiseScale: gradients must be contiguous f32");
    // The running sum lives beside the gradient; a device's is summed by ops.
    if (!sum_[i].defined() || sum_[i].numel() != g.numel() || sum_[i].device() != g.device()) {
      sum_[i] = Tensor::zeros(g.shape(), DType::f32, g.device());
    }
    if (!g.device().is_cpu()) {
      sum_[i].copy_from(steps_ == 0 ? g : add(sum_[i], g));
      continue;
    }
    float* s = sum_[i].data<float>();
    const float* x = g.data<float>();
    const bool first = steps_ == 0;
    parallel_for(0, g.numel(), optim::kUpdateGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) s[k] = first ? x[k] : s[k] + x[k];
    });
  }
  sq_sum_ += sum_squares(gradients);
  if (++steps_ < window_) return;
  // Small batch b: the steps' own gradients; big batch k*b: their mean.
  const double k = static_cast<double>(window_), b = static_cast<double>(batch_);
  const double small = sq_sum_ / k, big = sum_squares(sum_) / (k * k);
  g2_sum_ += (k * big - small) / (k - 1);
  trace_sum_ += (small - big) * b * k / (k - 1);
  ++windows_;
  steps_ = 0;
}

double NoiseScale::scale(double trace_sigma_sum, double g2_sum) {
  if (trace_sigma_sum == 0 && g2_sum == 0) return std::numeric_limits<double>::quiet_NaN();
  if (!(g2_sum > 0)) return std::numeric_limits<double>::infinity();
  return trace_sigma_sum / g2_sum;
}

void NoiseScale::reset() {
  windows_ = 0;
  trace_sum_ = g2_sum_ = 0;
  steps_ = 0;
}

nlohmann::json NoiseScale::state_dict() const {
  return {{"windows", windows_}, {"trace_sigma_sum", trace_sum_}, {"g2_sum", g2_sum_}};
}

void NoiseScale::load_state_dict(const nlohmann::json& state) {
  windows_ = state.value("windows", int64_t{0});
  trace_sum_ = state.value("trace_sigma_sum", 0.0);
  g2_sum_ = state.value("g2_sum", 0.0);
  steps_ = 0;
}

BatchSchedule::BatchSchedule(const BatchScheduleOptions& o) : o_(o), batch_(o.batch), noise_(o.noise_window) {
  if (o.rule != "none" && o.rule != "epoch" && o.rule != "noise") {
    fail<ConfigError>("train.batch_schedule = {} (known: none, epoch, noise)", o.rule);
  }
  if (o.batch < 1) fail<ConfigError>("train.batch_size must be >= 1, got {}", o.batch);
  if (!(o.growth > 1)) fail<ConfigError>("train.batch_growth must be > 1, got {}", o.growth);
  if (o.every < 1) fail<ConfigError>("train.batch_every must be >= 1, got {}", o.every);
  if (o.max != 0 && o.max < o.batch) {
    fail<ConfigError>("train.batch_max = {} is below train.batch_size = {}", o.max, o.batch);
  }
  if (o.lr_scaling != "none" && o.lr_scaling != "linear" && o.lr_scaling != "sqrt") {
    fail<ConfigError>("train.lr_scaling = {} (known: none, linear, sqrt)", o.lr_scaling);
  }
  if (o.replicas < 1) fail<ValueError>("BatchSchedule: replicas must be >= 1, got {}", o.replicas);
}

int64_t BatchSchedule::epoch_rule_batch(int64_t epoch) const {
  const double grown = static_cast<double>(o_.batch) * std::pow(o_.growth, static_cast<double>(epoch / o_.every));
  const double cap = o_.max > 0 ? static_cast<double>(o_.max) : 1e15;
  return std::llround(std::min(grown, cap));
}

int64_t BatchSchedule::planned_batch(int64_t epoch) const {
  return o_.rule == "epoch" ? epoch_rule_batch(epoch) : batch_;
}

std::string BatchSchedule::start_epoch(int64_t epoch, const std::function<void(std::vector<double>&)>& agree) {
  if (o_.rule == "none" || epoch <= decided_epoch_) return "";
  decided_epoch_ = epoch;
  const int64_t before = batch_;
  std::string why;
  if (o_.rule == "epoch") {
    batch_ = epoch_rule_batch(epoch);
    why = fmt::format("epoch {}", epoch + 1);
  } else {
    // Every rank must take the same batch: decide from rank 0's figures.
    std::vector<double> figures{noise_.trace_sigma_sum(), noise_.g2_sum(), static_cast<double>(noise_.windows())};
    if (agree) agree(figures);
    if (figures[2] < 1) return "";  // nothing measured yet
    const double scale = NoiseScale::scale(figures[0], figures[1]);
    noise_.reset();
    // One growth per epoch at most: the estimate is noisy, and +inf (no
    // measurable signal) must not send the batch past the epoch.
    const int64_t next = std::llround(static_cast<double>(batch_) * o_.growth);
    if ((o_.max == 0 || next <= o_.max) && static_cast<double>(next) * o_.replicas <= scale) batch_ = next;
    why = fmt::format("gradient noise scale {:.0f}", scale);
  }
  if (batch_ == before) return "";
  return fmt::format("batch size {} per rank ({} in all) from {} ({}); learning rate x{:.3g}", batch_,
                     batch_ * o_.replicas, before, why, lr_factor());
}

double BatchSchedule::lr_factor() const {
  const double ratio = static_cast<double>(batch_) / static_cast<double>(o_.batch);
  if (o_.lr_scaling == "linear") return ratio;
  if (o_.lr_scaling == "sqrt") return std::sqrt(ratio);
  return 1;
}

nlohmann::json BatchSchedule::state_dict() const {
  return {{"batch", batch_}, {"decided_epoch", decided_epoch_}, {"examples", examples_}, {"noise", noise_.state_dict()}};
}

void BatchSchedule::load_state_dict(const nlohmann::json& state) {
  batch_ = state.value("batch", o_.batch);
  decided_epoch_ = state.value("decided_epoch", int64_t{-1});
  examples_ = state.value("examples", int64_t{0});
  noise_.load_state_dict(state.value("noise", nlohmann::json::object()));
}

}  // namespace braid::train
