// Dynamic loss scaling for f16 mixed precision, as torch.cuda.amp.GradScaler.
//
// f16 gradients flush to zero below 2^-24 (braid/ops/autocast.h), so the loss
// is multiplied by a large scale before backward, which lifts every gradient
// by the same factor; the gradients are divided back before the optimizer
// sees them. Too large a scale overflows to inf/NaN instead: that step is
// skipped and the scale halved, and after `growth_interval` clean steps in a
// row the scale doubles again, probing for the largest one that fits.
//
//   Tensor loss = ...;                                  // under Autocast(f16)
//   backward(scaler.scale(loss));
//   const bool found_inf = scaler.unscale_and_check(params);
//   if (!found_inf) optimizer.step();                   // clip before, if at all
//   scaler.update(found_inf);
//
// Gradients may live on any device: the check is built from registry ops and
// reads back one number per call, not the gradients.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::optim {

// PyTorch's GradScaler defaults.
struct LossScalerOptions {
  double init_scale = 65536.0;     // 2^16; powers of two keep (un)scaling exact
  double growth_factor = 2.0;      // > 1
  double backoff_factor = 0.5;     // in (0, 1)
  int64_t growth_interval = 2000;  // clean steps in a row before growing, >= 1
};

class LossScaler {
 public:
  // ValueError when an option is out of range.
  explicit LossScaler(LossScalerOptions options = {});

  // loss * scale(), differentiable: its backward yields scale() times the
  // true gradients.
  Tensor scale(const Tensor& loss) const;

  // Divides every defined gradient of `params` by scale(), in place (views
  // such as a data-parallel bucket see it), and returns true when any
  // gradient holds an inf or NaN; the caller then skips the optimizer step.
  // Once per step: a second call before update() is a ValueError, since it
  // would divide the gradients twice.
  bool unscale_and_check(const std::vector<Tensor>& params);
  // The same over gradient tensors themselves (undefined ones skipped), such
  // as parallel::Plan::gradients(): ZeRO's slices of the gradients.
  bool unscale_gradients_and_check(const std::vector<Tensor>& grads);

  // Ends the step: found_inf backs the scale off and restarts the count of
  // clean steps; a clean step counts, and the growth_interval-th grows it.
  // Where ranks hold different gradients (ZeRO slices, tensor or pipeline
  // shards) every rank must pass the same found_inf: OR the ranks' flags
  // first, or they skip different steps.
  void update(bool found_inf);

  double scale() const { return scale_; }
  // Clean steps since the last change of scale.
  int64_t growth_tracker() const { return growth_tracker_; }

  // {"scale", "growth_factor", "backoff_factor", "growth_interval",
  // "growth_tracker"}: GradScaler.state_dict()'s keys.
  nlohmann::json state_dict() const;
  // Restores state_dict(); ValueError naming a missing or bad entry.
  void load_state_dict(const nlohmann::json& state);

 private:
  LossScalerOptions o_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false;  // unscale_and_check ran since the last update
};

}  // namespace braid::optim
