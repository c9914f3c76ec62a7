// Which tokens of a sequence each rank of a context-parallel group holds
// (docs/context_parallel.md, "Layout").
//
// The sequence of T tokens is cut into equal chunks. Contiguous (Ulysses):
// C chunks, rank r holds chunk r. Zig-zag (ring attention under a causal
// mask): 2C chunks, rank r holds chunks r and 2C-1-r side by side, so every
// rank has as many early (cheap) as late (expensive) query rows and the
// ring's steps cost the same on every rank:
//
//   C = 2, T = 8:  rank 0 holds positions 0 1 | 6 7,  rank 1 holds 2 3 | 4 5
//
// A rank's local tensors are [B, T / C, ...], its chunks in the order above.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::context_parallel {

struct ContextLayout {
  int size = 1;  // C, ranks in the group
  int rank = 0;
  bool zigzag = true;

  // Equal chunks the sequence is cut into: 2C zig-zag, C contiguous.
  int chunks() const { return zigzag ? 2 * size : size; }
  // Chunks per rank (2 zig-zag, 1 contiguous).
  int chunks_per_rank() const { return zigzag ? 2 : 1; }
  // The global chunk index of rank r's local chunk i.
  int chunk_of(int r, int i) const { return i == 0 ? r : 2 * size - 1 - r; }
  // Refuses (ConfigError naming `what`) a sequence length the chunks do not divide.
  void check_length(int64_t length, const char* what) const;
  // [begin, end) global positions of this rank's local chunks for a sequence
  // of `length` tokens, in local order.
  std::vector<std::pair<int64_t, int64_t>> spans(int64_t length) const;
  // This rank's tokens of x (the whole sequence along `dim`), contiguous.
  Tensor shard(const Tensor& x, int64_t dim) const;
};

// Every rank's local x [B, T / C, ...] along dim 1 -> the whole [B, T, ...] in
// global order, on every rank (an all-gather over `cp`; no gradient: for
// evaluation).
Tensor gather_sequence(const Tensor& local, const comm::Communicator& cp, const ContextLayout& layout);

}  // namespace braid::parallel::context_parallel
