// Turning a model tensor-parallel without changing the code that built it:
// the layers of an nn::Sequential are swapped, in place and under the same
// names, for their tensor-parallel counterparts built from their weights.
//
//   nn::TokenPositionEmbedding  -> vocabulary-parallel token table
//   nn::TransformerBlock        -> heads split, MLP column then row
//   Linear ... Linear           -> column-parallel then row-parallel (Megatron's
//                                  MLP), when only parameter-free elementwise
//                                  layers (ReLU, GELU, Tanh) lie between
//   the last Linear, unpaired   -> column-parallel over the classes, with the
//                                  vocabulary-parallel cross-entropy as the loss
//
// Everything else (convolutions, layer norms, a Linear that cannot be paired)
// stays replicated, and `replicated` lists it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/parallel/shard_spec.h"

namespace braid::parallel::tensor_parallel {

struct Sharded {
  nn::LossFn loss;  // the vocabulary-parallel cross-entropy when the head was split, else the given loss
  // This rank's output -> the whole output (the head's slices gathered).
  std::function<Tensor(const Tensor&)> full_output;
  ShardSpecs specs;                     // every sliced parameter
  std::vector<std::string> replicated;  // names of the layers left whole
};

// Every rank of `tp` must rewrite the same model. A split head's loss is the
// vocabulary-parallel cross-entropy (classification heads; `loss` is kept
// otherwise). ConfigError for attention heads that the degree does not divide
// or layers narrower than the degree.
Sharded shard_tensor_parallel(nn::Sequential& model, const comm::Communicator& tp, nn::LossFn loss);

}  // namespace braid::parallel::tensor_parallel
