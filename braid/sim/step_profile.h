// One rank's share of a training step, layer by layer, from the op table: what
// a simulated plan schedules (docs/sim.md, "Step profile").
//
// The step of the model a config trains is captured on the meta device
// (graph/step.h) with each node placed on the layer it belongs to (backward
// ops with their forward, the loss with the last layer, each parameter's
// update with its layer), simplified as the training step is, and every
// node's time looked up in the OpTable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/sim/op_table.h"
#include "braid/train/config.h"

namespace braid::sim {

struct LayerProfile {
  std::string name;          // the model's layer name ("0", "block1", ...); "model" for a model that is not Sequential
  double forward = 0;        // seconds for one (micro-)batch
  double backward = 0;
  double update = 0;         // the optimizer's update of the layer's parameters
  int64_t parameter_bytes = 0;
  int64_t output_bytes = 0;  // the layer's output for one (micro-)batch: what a pipeline stage boundary sends
  int64_t nodes = 0;
  // Parts of forward and backward by op, for tensor parallelism's model
  // (plan_builder.h): the GEMMs (linear, matmul and their backward products),
  // which the overlapped collectives pipeline with, and the sequence-wise work
  // (layer and RMS norms, dropout, residual adds), which plain tensor
  // parallelism leaves whole on every rank and sequence parallelism divides.
  double gemm_forward = 0, gemm_backward = 0;
  double sequence_forward = 0, sequence_backward = 0;
  // An MoE layer (moe_cost.h; experts 0 otherwise): the part of forward,
  // backward and update that is its experts' (all E of them, on one rank),
  // their weights' bytes, and the bytes one rank dispatches per (micro-)batch,
  // its N top_k routed rows of d_model (its own share included).
  int64_t experts = 0;
  double expert_forward = 0, expert_backward = 0, expert_update = 0;
  int64_t expert_parameter_bytes = 0;
  int64_t dispatch_bytes = 0;
};

struct GradientReady {
  std::string name;       // parameter name
  int layer = 0;
  int64_t bytes = 0;
  double ready = 0;       // seconds after backward starts when the gradient is final
  bool expert = false;    // an MoE layer's experts (reduced over expert replicas under parallel.expert)
};

struct StepProfile {
  std::string model;        // model.name
  int64_t batch = 0;        // examples the profile is for
  int threads = 1;
  std::vector<LayerProfile> layers;
  std::vector<GradientReady> gradients;  // in the order backward finishes them
  double forward = 0, backward = 0, update = 0;  // sums over layers
  int64_t parameter_bytes = 0;
  int64_t nodes = 0;

  // One replica's compute in a step of `microbatches` forwards and backwards and one update.
  double step(int microbatches = 1) const { return microbatches * (forward + backward) + update; }
};

// The profile of `config`'s model on a batch of `batch` examples (0: the
// config's train.batch_size) with `threads` intra-op threads.
StepProfile profile_step(const train::Config& config, OpTable& table, int64_t batch = 0, int threads = 1);

// The profile scaled so that `microbatches` x (forward + backward) + update is
// `step` seconds (every layer's times and the gradients' ready times by one
// factor): the op table times each op alone, with its operands in cache and
// without the autograd engine's bookkeeping, and the whole step runs slower
// than that sum by a factor that depends on the model and the batch
// (docs/sim.md, "Calibration").
void scale_to(StepProfile& profile, double step, int microbatches = 1);

// How measure_eager_step times a step.
struct EagerStep {
  int64_t batch = 0;     // rows of a micro-batch (0: train.batch_size)
  int threads = 1;
  int microbatches = 1;  // forwards and backwards per step, gradients accumulated, then one update
  // Steps are timed for kWindow seconds (at least kMinSteps of them) from
  // here, or from the end of the warm-up if that is later: processes
  // measuring side by side are given one start, so their windows overlap.
  std::chrono::steady_clock::time_point start{};
  static constexpr double kWindow = 0.3;
  static constexpr int kMinSteps = 5;
};

// The measured seconds of that step run eagerly in this process: the median
// step of the window, after warm-up.
double measure_eager_step(const train::Config& config, const EagerStep& how);

// Seconds the config's data loader spends filling one batch of `batch`
// examples (the work its thread does beside every step): the median over
// 0.2 s of batches filled in this thread.
double measure_batch_load(const train::Config& config, int64_t batch);

}  // namespace braid::sim
