// Server-side optimizers: the optimizer state of a parameter-server job lives
// next to the weights it updates, on the server that owns them.
//
// An updater works on one contiguous run of weights (a dense shard, or one
// sparse row) with its own state: state_per_weight() floats per weight, stored
// block-wise (state[k * n + i] is slot k of weight i). Formulas follow
// PyTorch's SGD (with momentum), Adagrad and Adam, weight decay added to the
// gradient.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "braid/ps/config.h"

namespace braid::ps {

class Updater {
 public:
  virtual ~Updater() = default;
  virtual int state_per_weight() const = 0;
  // One step: `step` counts this run's updates, starting at 1 (Adam's bias
  // correction).
  virtual void apply(std::span<float> w, std::span<const float> g, std::span<float> state, double lr,
                     int64_t step) const = 0;
};

// ConfigError for an unknown name.
std::unique_ptr<Updater> make_updater(const UpdaterOptions& options);

}  // namespace braid::ps
