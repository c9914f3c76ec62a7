// Batch-size schedules (train.batch_schedule): the batch grows between epochs
// instead of (or beside) the learning rate decaying, and the learning rate
// follows the batch by a rule.
//
//   epoch  the per-rank batch is multiplied by `growth` every `every` epochs
//   noise  at each epoch start it grows by `growth` when the grown global
//          batch stays at or below the gradient noise scale measured since
//          the last decision (NoiseScale below): the batch past which a
//          larger one mostly averages noise away instead of saving steps
//
// Growth happens only between epochs, and every data-parallel rank takes the
// same per-rank batch, so each rank still reads its disjoint shard of the
// epoch's permutation whole: only how the shard is cut into batches changes.
// The learning rate is base_lr x (batch / first batch)^p (p = 1 linear, 1/2
// square root, 0 none) on top of optim.schedule, which advances by examples:
// one first-epoch batch is one of its steps, so warm-up and decay keep their
// place in the epochs however the batch grows.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::train {

// The gradient noise scale B = tr(Sigma) / |G|^2 (McCandlish et al., 2018,
// "simple" form): Sigma the per-example gradient covariance, G the true
// gradient. A step's gradient at batch b has E|g|^2 = |G|^2 + tr(Sigma) / b;
// the mean of `window` consecutive steps' gradients is (nearly: the weights
// move a little) a gradient at batch window x b. The two sizes give unbiased
// estimates of |G|^2 and tr(Sigma); their sums over all windows since the
// last reset give B as a ratio of means (each window alone is noisy). Costs
// one gradient-sized buffer.
class NoiseScale {
 public:
  // Sum of squares of tensors laid out like the gradients, over the whole
  // model (Plan::sum_squares: across shards).
  using SumSquares = std::function<double(const std::vector<Tensor>&)>;

  explicit NoiseScale(int64_t window);
  // One step's (combined) gradients at global batch `batch`. A change of
  // batch starts a new window.
  void observe(const std::vector<Tensor>& gradients, int64_t batch, const SumSquares& sum_squares);
  // Windows completed since the last reset, and their summed estimates.
  int64_t windows() const { return windows_; }
  double trace_sigma_sum() const { return trace_sum_; }
  double g2_sum() const { return g2_sum_; }
  // tr(Sigma) / |G|^2 from the sums; +inf when |G|^2 is not estimated
  // positive (noise dominates), NaN when no window completed.
  static double scale(double trace_sigma_sum, double g2_sum);
  void reset();
  nlohmann::json state_dict() const;  // the sums (a partial window is not kept)
  void load_state_dict(const nlohmann::json& state);

 private:
  int64_t window_;
  std::vector<Tensor> sum_;  // running sum of the window's gradients
  int64_t steps_ = 0, batch_ = 0;
  double sq_sum_ = 0;        // sum of the window's |g|^2
  int64_t windows_ = 0;
  double trace_sum_ = 0, g2_sum_ = 0;
};

struct BatchScheduleOptions {
  std::string rule = "none";          // none | epoch | noise
  int64_t batch = 64;                 // per-rank batch of the first epoch
  double growth = 2;                  // factor of each growth (> 1)
  int64_t every = 1;                  // epoch rule: epochs between growths
  int64_t max = 0;                    // largest per-rank batch; 0: no limit
  std::string lr_scaling = "linear";  // none | linear | sqrt
  int64_t noise_window = 8;           // noise rule: steps per estimate
  int replicas = 1;                   // data-parallel replicas: global batch = batch x replicas
};

class BatchSchedule {
 public:
  // ConfigError naming the train.* key for a bad option.
  explicit BatchSchedule(const BatchScheduleOptions& options);

  // Called at the start of each epoch, in order (again after a resume): the
  // per-rank batch of `epoch`. The noise rule decides from the figures
  // observed since its last decision, made alike on every rank by `agree`
  // (Plan::agree). Returns a line describing a change, "" when none.
  std::string start_epoch(int64_t epoch, const std::function<void(std::vector<double>&)>& agree);
  int64_t batch() const { return batch_; }
  // The batch `epoch` will have as far as is known now (the epoch rule's, or
  // the current one): for the planned step count.
  int64_t planned_batch(int64_t epoch) const;
  // (batch / first batch)^p.
  double lr_factor() const;
  // Examples this rank has trained on, and the step of optim.schedule they
  // amount to (in first-epoch batches).
  void count(int64_t examples) { examples_ += examples; }
  int64_t schedule_step() const { return examples_ / o_.batch; }

  bool observes_gradients() const { return o_.rule == "noise"; }
  NoiseScale& noise() { return noise_; }

  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  int64_t epoch_rule_batch(int64_t epoch) const;

  BatchScheduleOptions o_;
  int64_t batch_;
  int64_t decided_epoch_ = -1;  // the epoch the current batch was chosen for
  int64_t examples_ = 0;
  NoiseScale noise_;
};

}  // namespace braid::train
