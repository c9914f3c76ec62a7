// The two halves of Rabenseifner's all-reduce, over a power-of-two subset of a
// group: core index c in [0, p2) is group rank real(c). Shared by
// halving_doubling.cc and binary_blocks.cc.
#pragma once

#include <functional>

#include "braid/comm/algorithms/group.h"

namespace braid::comm {

struct Pow2Set {
  int p2;                        // power of two
  int core;                      // this rank's index, in [0, p2)
  std::function<int(int)> real;  // core index -> group rank
};

// Recursive halving: afterwards this rank holds segment `core` of
// Partition{count, p2}, reduced over the set. log2 p2 rounds.
void halving_reduce_scatter(Group& g, const ReduceArgs& a, const Pow2Set& set);
// Recursive doubling: every rank contributes segment `core` of
// Partition{count, p2} (elements of `elem` bytes) and ends with all of them.
void doubling_allgather(Group& g, std::byte* data, size_t count, size_t elem, const Pow2Set& set);

}  // namespace braid::comm
