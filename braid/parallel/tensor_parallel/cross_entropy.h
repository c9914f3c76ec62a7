// Cross-entropy over vocabulary-parallel logits: each tensor rank holds the
// logits of its slice [begin, end) of the classes, and the whole logits are
// never gathered. Per row: the max and the sum of exponentials are
// all-reduced (max, then sum), the target's logit comes from the rank that
// owns it (the others add zero), and
//   loss = log(sum_j exp(z_j - m)) - (z_target - m),
// averaged over the rows, like nn::cross_entropy_loss on the whole logits.
// The gradient is (softmax - one_hot(target)) / rows on each rank's slice.
// Slices may differ in width (a vocabulary that the degree does not divide).
#pragma once

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::tensor_parallel {

// logits [..., end - begin] f32 (this rank's classes), targets i64 [...] in
// [0, classes). Every rank returns the same mean loss.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t begin, int64_t classes,
                                    const comm::Communicator& tp);

}  // namespace braid::parallel::tensor_parallel
