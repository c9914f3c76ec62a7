// Cutting a sequential model into pipeline stages: contiguous runs of
// layers, at explicit boundaries or balanced so the costliest stage costs as
// little as possible (the step runs at the pace of the slowest stage).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/nn/sequential.h"

namespace braid::parallel::pipeline {

// Per layer: its parameter count plus one (so layers without parameters
// still cost something). For models whose layers do work in proportion to
// their weights (linear layers, transformer blocks), a proxy for the FLOPs.
std::vector<double> parameter_costs(const nn::Sequential& model);

// Per layer: the median over `repeats` runs of its forward and backward
// time on `sample` (what the layer before it produces), in seconds.
std::vector<double> measured_costs(const nn::Sequential& model, const Tensor& sample, int repeats = 3);

// First-layer index of each of `stages` stages (the first is 0), cutting
// `costs` into contiguous runs that minimise the largest run's sum (linear
// partition by dynamic programming). ConfigError when there are fewer layers
// than stages.
std::vector<int> balanced_starts(const std::vector<double>& costs, int stages);

// Explicit boundaries (the first layer of stages 1..P-1, increasing) as
// starts; ConfigError naming the problem otherwise.
std::vector<int> starts_from_boundaries(const std::vector<int>& boundaries, int layers, int stages);

// Stage `stage`'s layers as a Sequential, each under its name in the whole
// model (so its parameters keep their names).
std::shared_ptr<nn::Sequential> cut_stage(const nn::Sequential& model, const std::vector<int>& starts, int stage);

// Interleaved schedules: `starts` cuts the model into P V virtual stages, and
// rank `rank` of `stages` holds virtual stages rank, rank + P, ... (its V
// chunks) as one Sequential, each layer under its name in the whole model,
// with the first layer of each chunk in it.
struct RankChunks {
  std::shared_ptr<nn::Sequential> model;
  std::vector<int> chunk_starts;
};
RankChunks cut_chunks(const nn::Sequential& model, const std::vector<int>& starts, int stages, int rank);

}  // namespace braid::parallel::pipeline
