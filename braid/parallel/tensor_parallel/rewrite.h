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
#include "braid/parallel/tensor_parallel/sequence_parallel.h"

namespace braid::parallel::tensor_parallel {

struct Sharded {
  nn::LossFn loss;  // the vocabulary-parallel cross-entropy when the head was split, else the given loss
  // This rank's output -> the whole output (the head's slices gathered).
  std::function<Tensor(const Tensor&)> full_output;
  ShardSpecs specs;                     // every sliced parameter
  std::vector<std::string> replicated;  // names of the layers left whole
};

// What the rewrite does to each layer of `model`, without doing it (the
// simulator counts a sharded step's collectives from it).
enum class LayerRole : uint8_t {
  replicated,  // left whole (a layer norm, a convolution, an unpaired Linear, a layer without parameters)
  embedding,   // vocabulary-parallel token table: all-reduce of the output in forward
  block,       // transformer block: all-reduce after attention and after the MLP in forward, and of the
               // input gradient of each in backward
  column,      // column-parallel Linear of a pair: all-reduce of its input gradient in backward
  inner,       // an elementwise layer between a pair: runs on the slices
  row,         // row-parallel Linear of a pair: all-reduce of the output in forward
  head,        // the last Linear split over the classes: the loss all-reduces two values per row in
               // forward; its input gradient is all-reduced in backward
};
std::vector<LayerRole> tensor_parallel_roles(const nn::Sequential& model);

// Every rank of `tp` must rewrite the same model. A split head's loss is the
// vocabulary-parallel cross-entropy (classification heads; `loss` is kept
// otherwise). ConfigError for attention heads that the degree does not divide
// or layers narrower than the degree.
//
// o.sequence_parallel: the model must be a language model (a token embedding,
// transformer blocks, norms, a head); the embedding's output is scattered
// along the sequence, blocks and norms run on segments, and the head gathers
// the sequence before its product (its logits are the whole sequence's, so
// the loss is the vocabulary-parallel cross-entropy as without). ConfigError
// for any other layer with parameters. o.overlap: the products beside the
// collectives are chunked and overlapped with them (overlap.h); a
// communication thread is made when o has none.
Sharded shard_tensor_parallel(nn::Sequential& model, const comm::Communicator& tp, nn::LossFn loss, TpOptions o = {});

}  // namespace braid::parallel::tensor_parallel
