// Dropout: zeroes each element with probability p and scales the survivors by
// 1 / (1 - p), so the expectation is unchanged; the identity in eval mode.
// The mask comes from a counter-based Philox Generator: element i of a call
// uses the generator's next word i, so a (seed, stream, offset) state replays
// the same mask on any thread count. The "dropout" op (a random op in the
// registry) names the generator by its address in an attribute, so a replayed
// call draws the next mask from it as an eager call would.
#pragma once

#include "braid/base/rng.h"
#include "braid/tensor/tensor.h"

namespace braid {

namespace op {
class Attrs;
}

struct DropoutOptions {
  double p = 0.5;
  bool training = true;
  // Advanced by numel() words per call; null uses this thread's
  // dropout_generator().
  Generator* generator = nullptr;
};

Tensor dropout(const Tensor& x, DropoutOptions options = {});

// The per-thread generator dropout falls back to (seed 0, stream 0 at first
// use); reseed it with set_state() or pass a Generator in the options.
Generator& dropout_generator();

// The generator a "dropout" op's attributes name (attribute generator: an
// address dropout() was given, or 0 for the calling thread's
// dropout_generator()); ValueError for any other address. Each backend's
// dropout kernel draws from it and advances it by numel() words.
Generator& dropout_generator_of(const op::Attrs& attrs);

// The "generator" attribute naming `gen` (0 for null: the thread's
// dropout_generator()), which dropout_generator_of() accepts from then on:
// for other random ops that draw dropout masks (scaled_dot_product_attention).
int64_t dropout_generator_attr(Generator* gen);

}  // namespace braid
