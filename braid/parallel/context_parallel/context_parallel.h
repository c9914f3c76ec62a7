// Context parallelism: the sequence of every example split over the ranks of
// the mesh's context axis (docs/context_parallel.md). Applied to a model from
// outside, after tensor parallelism and the pipeline cut:
//
//   inputs, targets   each rank keeps its tokens (layout.h: zig-zag for the
//                     ring, contiguous for Ulysses)
//   embedding         looks up the whole sequence (cheap) and keeps this
//                     rank's rows, so learned positions are global ones
//   attention         nn::attend replaced, around forward and backward, by
//                     the ring (ring_attention.h) or Ulysses (ulysses.h),
//                     rotary positions taken at the tokens' global positions
//   everything else   per token: runs on the rank's tokens unchanged
//   loss              each rank's mean over its tokens; their mean over the
//                     axis is the sequence's (equal token counts)
//   gradients         averaged over data x context (Mesh::data_context_group):
//                     each rank's covers its tokens' share of every loss
#pragma once

#include <memory>
#include <string>

#include "braid/comm/communicator.h"
#include "braid/nn/attention.h"
#include "braid/nn/sequential.h"
#include "braid/parallel/context_parallel/layout.h"

namespace braid::parallel::context_parallel {

enum class Mode : uint8_t { ring, ulysses };
Mode parse_mode(const std::string& name);  // "ring" | "ulysses"; ConfigError otherwise
const char* name(Mode mode);

class ContextParallel {
 public:
  ContextParallel(comm::Communicator cp, Mode mode);
  Mode mode() const { return mode_; }
  const ContextLayout& layout() const { return layout_; }
  const comm::Communicator& group() const { return cp_; }
  // This rank's tokens of a batch [B, T, ...] (token ids, targets).
  Tensor shard(const Tensor& x) const { return layout_.shard(x, 1); }
  // Every rank's output [B, T / C, ...] -> the whole [B, T, ...] (evaluation).
  Tensor gather(const Tensor& local) const { return gather_sequence(local, cp_, layout_); }
  // The mean of each rank's value over the context axis (the step's loss).
  double average(double value) const;
  // What nn::attend becomes while the plan runs this rank's part of a step
  // (install it with nn::AttendOverride).
  const nn::AttendFn& attend() const { return attend_; }

 private:
  comm::Communicator cp_;
  Mode mode_;
  ContextLayout layout_;
  nn::AttendFn attend_;
};

// Refuses, with a ConfigError naming the keys, a model context parallelism
// cannot run: layers other than a gpt's (token embedding, transformer blocks,
// norm, head), attention dropout, and under Ulysses heads or key/value heads
// (per tensor-parallel rank) that C does not divide. `model` is the whole
// model, before tensor parallelism rewrites it.
void check_model(const nn::Sequential& model, const ContextParallel& cp, int tensor_degree);

// Makes this rank's part of the model (after tensor parallelism and the
// pipeline cut) take its tokens: the embedding at layer 0, if this part has
// it, looks up the whole sequence and keeps this rank's rows. Parameter names
// do not change.
void apply(nn::Sequential& model, const ContextParallel& cp);

}  // namespace braid::parallel::context_parallel
