// Sequence parallelism in the Megatron sense (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models"), and the
// choice of collective around each tensor-parallel product.
//
// Under plain tensor parallelism the layer norms, dropouts and residuals run
// on the whole sequence, the same on every tensor rank. With
// sequence_parallel they run on this rank's segment of T / t tokens, and the
// all-reduce that closes a split region becomes a reduce-scatter along the
// sequence, the identity that opens one an all-gather (backward: the
// conjugates). The bytes on the wire are the same (an all-reduce is a
// reduce-scatter then an all-gather); the activations outside the split
// regions shrink t-fold.
//
// A replicated parameter used on a segment (a norm's weight and bias, a
// row-parallel layer's bias, learned positions) gets a gradient from that
// segment only: it goes through copy_to_tensor_parallel, whose backward sums
// it over the tensor group.
#pragma once

#include <memory>

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/parallel/tensor_parallel/overlap.h"

namespace braid::parallel::tensor_parallel {

struct TpOptions {
  // Layer norms, dropout and residuals on sequence segments (inputs [B, T / t, D]).
  bool sequence_parallel = false;
  // Split each GEMM beside a collective into chunks pipelined with it (overlap.h);
  // false: one GEMM, then the collective, blocking.
  bool overlap = false;
  OverlapOptions overlap_options{};
};

// x w^T where a split region opens (column-parallel): under sequence
// parallelism x is this rank's segment [B, T / t, K] and the product covers
// the whole sequence; otherwise x is replicated and its gradient all-reduced.
Tensor column_product(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const TpOptions& o);
// x w^T where a split region closes (row-parallel): partial products summed
// over the ranks, the whole result ([..., N]) or under sequence parallelism
// this rank's segment of it ([B, T / t, N]).
Tensor row_product(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const TpOptions& o);

// A LayerNorm or RMSNorm run on a sequence segment, its parameters (the
// norm's own, under the norm's names) summed over the tensor group in
// backward. ConfigError for any other layer.
class SequenceParallelNorm final : public nn::Module {
 public:
  SequenceParallelNorm(std::shared_ptr<nn::Module> norm, comm::Communicator tp);
  Tensor forward(const Tensor& x) override;
  // True for the layers this can wrap.
  static bool wraps(const nn::Module& m);

 private:
  comm::Communicator tp_;
  std::shared_ptr<nn::Module> norm_;  // kept for its kind and eps; its parameters are registered here
  bool rms_;
  double eps_;
  Shape shape_;
  Tensor weight_, bias_;
};

}  // namespace braid::parallel::tensor_parallel
