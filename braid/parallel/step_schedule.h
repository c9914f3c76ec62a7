// Step schedule: the plan part that owns forward and backward of a training
// step (docs/design.md, "parallel"): the local step with micro-batches here,
// the pipeline schedules (GPipe, 1F1B) in pipeline/.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "braid/nn/loss.h"
#include "braid/nn/module.h"

namespace braid::parallel {

class StepSchedule {
 public:
  virtual ~StepSchedule() = default;
  virtual std::string name() const = 0;
  // Forward and backward of one step over (input, target): gradients
  // accumulate into the parameters' .grad. `set_sync(false)` before a
  // backward that must only accumulate, `set_sync(true)` before the last one
  // (the data axis then communicates once per step). Returns the batch's mean
  // loss, on every rank of the replica.
  virtual double run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                     const std::function<void(bool)>& set_sync) = 0;
  // The model's output for evaluation (no autograd) on the ranks that end the
  // model; undefined elsewhere.
  virtual Tensor evaluate(nn::Module& model, const Tensor& input) = 0;
  virtual bool ends_model() const { return true; }
  // Figures of the last step for benchmarks (a pipeline's busy time and live
  // activations); empty when the schedule keeps none.
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
};

// One process runs the whole model: the batch in `microbatches` slices along
// dim 0 (gradient accumulation), slice i's loss weighted by its share n_i / N
// so the accumulated gradient is the whole batch's mean gradient. With
// `max_rows` > 0 a batch is cut into at least ceil(N / max_rows) slices, so a
// batch that grows during training (train.batch_schedule) is accumulated
// rather than run at once.
class LocalSchedule final : public StepSchedule {
 public:
  explicit LocalSchedule(int microbatches = 1, int64_t max_rows = 0);
  std::string name() const override { return "local"; }
  double run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
             const std::function<void(bool)>& set_sync) override;
  Tensor evaluate(nn::Module& model, const Tensor& input) override;

 private:
  int microbatches_;
  int64_t max_rows_;
};

// [begin, end) rows of micro-batch i when n rows go into m micro-batches: the
// first n % m get one row more. ValueError when m < 1 or m > n.
std::pair<int64_t, int64_t> microbatch_rows(int64_t n, int m, int i);

}  // namespace braid::parallel
