// The step profile of a model with mixture-of-experts layers (docs/sim.md,
// "Mixture of experts"). An MoE layer routes on the host from the router's
// probabilities, which a meta-device capture has not got, so the profile is
// captured of the dense twin (every MoE MLP replaced by a dense MLP of the
// expert's width, model.moe.experts = 0) and each MoE layer's expert work is
// added from the op table under balanced routing: the N tokens of a
// (micro-)batch make N top_k rows (times the capacity factor when it is below
// 1), through fc1 and fc2 as two products each way.
#pragma once

#include <cstdint>

#include "braid/sim/op_table.h"
#include "braid/sim/step_profile.h"
#include "braid/train/config.h"

namespace braid::sim {

// Whether the config's model has MoE layers (gpt with model.moe.experts > 0).
bool has_moe(const train::Config& config);

// profile_step for such a model: the dense twin's profile with the experts'
// work, weights and gradients in place of each MoE layer's dense MLP.
StepProfile profile_moe_step(const train::Config& config, OpTable& table, int64_t batch, int threads);

// Seconds of one expert-MLP forward over `rows` rows (fc1 [fc1_rows, dim],
// fc2 [dim, hidden]) on `threads` threads, from the op table's matmuls; a
// backward is twice this (the input's and the weights' products).
double expert_forward_seconds(OpTable& table, int64_t rows, int64_t dim, int64_t hidden, int64_t fc1_rows,
                              int threads);

}  // namespace braid::sim
