#include "braid/optim/loss_scaler.h"

#include <cmath>
#include <string>

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/tensor_ops.h"

namespace braid::optim {
namespace {

void check_options(const LossScalerOptions& o) {
  if (!(o.init_scale > 0) || !std::isfinite(o.init_scale)) {
    fail<ValueError>("LossScaler: init_scale must be finite and > 0, got {}", o.init_scale);
  }
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor)) {
    fail<ValueError>("LossScaler: growth_factor must be finite and > 1, got {}", o.growth_factor);
  }
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1)) {
    fail<ValueError>("LossScaler: backoff_factor must be in (0, 1), got {}", o.backoff_factor);
  }
  if (o.growth_interval < 1) fail<ValueError>("LossScaler: growth_interval must be >= 1, got {}", o.growth_interval);
}

// A 0-d tensor that is 0 when every element of u is finite and NaN otherwise:
// inf * 0 and NaN * 0 are NaN (IEEE 754) and survive the sum, while finite
// values contribute exact zeros, so no sum of large values can overflow.
// Built from mul and sum, which every backend has: isfinite as a reduction.
Tensor nonfinite_flag(const Tensor& u) { return sum(mul(u, 0.0)); }

}  // namespace

LossScaler::LossScaler(LossScalerOptions options) : o_(options), scale_(options.init_scale) { check_options(o_); }

Tensor LossScaler::scale(const Tensor& loss) const { return mul(loss, scale_); }

bool LossScaler::unscale_and_check(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params) grads.push_back(p.grad());
  return unscale_gradients_and_check(grads);
}

// Per gradient: u = g / scale (mul), g = u (copy_, in place), flag += sum(u * 0):
// three elementwise passes and a reduction, the flags summed on the
// gradients' device so one number comes back (one host sync per step).
bool LossScaler::unscale_gradients_and_check(const std::vector<Tensor>& grads) {
  if (unscaled_) fail<ValueError>("LossScaler: unscale_and_check called twice before update()");
  unscaled_ = true;
  autograd::NoGradGuard no_grad;  // gradient arithmetic, not part of any model
  const double inv = 1.0 / scale_;
  Tensor flags;  // sum of the flags so far, on the first gradient's device
  bool found_inf = false;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    const Tensor u = mul(g, inv);
    copy_(g, u);
    const Tensor f = nonfinite_flag(u);
    if (!flags.defined()) {
      flags = cast(f, DType::f64);
    } else if (f.device() == flags.device()) {
      flags = add(flags, cast(f, DType::f64));
    } else {
      found_inf = found_inf || !std::isfinite(f.item());  // a second device: its own read-back
    }
  }
  return found_inf || (flags.defined() && !std::isfinite(flags.item()));
}

void LossScaler::update(bool found_inf) {
  unscaled_ = false;
  if (found_inf) {
    scale_ *= o_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == o_.growth_interval) {
    scale_ *= o_.growth_factor;
    growth_tracker_ = 0;
  }
}

nlohmann::json LossScaler::state_dict() const {
  return {{"scale", scale_},
          {"growth_factor", o_.growth_factor},
          {"backoff_factor", o_.backoff_factor},
          {"growth_interval", o_.growth_interval},
          {"growth_tracker", growth_tracker_}};
}

void LossScaler::load_state_dict(const nlohmann::json& state) {
  auto number = [&](const char* key) {
    if (!state.is_object() || !state.contains(key) || !state.at(key).is_number()) {
      fail<ValueError>("loss scaler state: '{}' is missing or not a number", key);
    }
    return state.at(key).get<double>();
  };
  auto integer = [&](const char* key) {
    number(key);
    const auto v = json_integer_if<int64_t>(state.at(key));
    if (!v) fail<ValueError>("loss scaler state: '{}' is not an integer", key);
    return *v;
  };
  // The state's scale is checked as an initial scale would be.
  LossScalerOptions o{.init_scale = number("scale"),
                      .growth_factor = number("growth_factor"),
                      .backoff_factor = number("backoff_factor"),
                      .growth_interval = integer("growth_interval")};
  check_options(o);
  const int64_t tracker = integer("growth_tracker");
  if (tracker < 0 || tracker >= o.growth_interval) {
    fail<ValueError>("loss scaler state: growth_tracker {} is outside [0, {})", tracker, o.growth_interval);
  }
  scale_ = o.init_scale;
  o.init_scale = o_.init_scale;  // the option stays this scaler's own
  o_ = o;
  growth_tracker_ = tracker;
  unscaled_ = false;
}

}  // namespace braid::optim
