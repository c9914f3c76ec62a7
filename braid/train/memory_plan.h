// Per-rank memory of a training run, planned before it runs (docs/memory.md):
// parameters, gradients and optimizer state from the rank's own model and
// plan, communication buffers from the plan's parts, and activations layer
// by layer from the shapes the layers will see and what their backward keeps
// (per recompute mode). `braid train --dry-run` prints it; the run's measured
// peak (metrics.jsonl's peak_activation_bytes) is what it predicts.
//
// The activation model is the transformer's (embedding, blocks, final norm,
// head and cross-entropy; f32): other layers are listed with no figure.
// Peak = what every layer keeps from forward to backward, times the
// micro-batches a schedule holds at once, plus the most any one layer's
// backward allocates on top (its gradients, weight-gradient temporaries and,
// under recompute, what it rebuilds).
#pragma once

#include <string>
#include <vector>

#include "braid/nn/module.h"

namespace braid::train {

class Config;

struct LayerMemory {
  std::string name;  // the layer's name in the whole model ("3")
  std::string kind;  // embedding | block (recompute mode) | norm | head | other
  int64_t kept = 0;      // bytes kept from forward to backward, one micro-batch
  int64_t backward = 0;  // bytes its backward allocates on top, at most
};

struct MemoryPlan {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0;
  int64_t communication = 0;  // buffers the plan's collectives hold
  std::vector<LayerMemory> layers;
  int64_t live_microbatches = 1;  // activations a schedule holds at once
  int64_t tokens = 0;             // rows x context of one micro-batch

  int64_t activations_kept() const;
  int64_t peak_activations() const;  // kept x live + the largest backward
  int64_t total() const;             // model state + communication + peak activations
  // A table for people: one row per category, then one per layer.
  std::string table() const;
};

struct MemoryShape {
  int64_t rows = 1;             // examples in one micro-batch
  int64_t context = 1;          // tokens per example
  int64_t live_microbatches = 1;
  bool ends_model = true;       // this rank runs the head and the loss
  double optimizer_states = 0;  // f32 buffers per parameter (Adam 2, momentum 1)
  int zero_stage = 0;           // ZeRO on the data axis (0: none)
  int data = 1;                 // data-parallel degree
  int64_t bucket_bytes = 0;     // data-parallel all-reduce buckets
  // parallel.sequence_parallel: the norms, residuals and dropout masks hold
  // this rank's segment of context / tensor tokens (docs/memory.md).
  int sequence_shards = 1;
};

// The plan of `model` (this rank's part: its tensor shard, its stage) for
// batches of `shape`.
MemoryPlan plan_memory(const nn::Module& model, const MemoryShape& shape);

// The shape of a config's run on a rank of pipeline stage `stage` of
// `stages` (reads the keys the run reads anyway).
MemoryShape memory_shape(const Config& config, int stage, int stages);

}  // namespace braid::train
