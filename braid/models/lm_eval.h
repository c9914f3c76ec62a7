// A language model's mean next-token loss over a stream of token ids (what
// `braid eval` prints), as held-out perplexity is usually reported: the
// stream is cut into windows of context + 1 ids that overlap by one, so each
// id after the first is predicted exactly once, from the ids before it within
// its window (at most `context`); the last window may be shorter.
#pragma once

#include <cstdint>
#include <span>

#include "braid/nn/sequential.h"

namespace braid::models {

struct LmEvalOptions {
  int64_t context = 0;  // ids a window predicts (> 0; at most the model's positions)
  int64_t batch = 8;    // windows per forward (fewer where their logits would pass 64 Mi floats)
};

struct LmEval {
  int64_t tokens = 0;     // ids predicted
  int64_t windows = 0;
  double loss = 0;        // mean negative log-likelihood, nats per token
  double perplexity = 0;  // exp(loss)
};

// model: a gpt Sequential (tokens [B, T] -> logits [B, T, vocab]), run in
// eval mode without gradients. ValueError naming the offset of the first id
// outside the vocabulary, or when fewer than 2 ids are given.
LmEval evaluate_lm(nn::Sequential& model, std::span<const int64_t> ids, const LmEvalOptions& options);

}  // namespace braid::models
