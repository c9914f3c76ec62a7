// Every collective algorithm, written once against Group (a Transport seen
// through one group of ranks). Costs use n bytes, p ranks, alpha (s per
// message), beta (s per byte on the wire), gamma (s per byte reduced); each
// .cc file states the derivation. All reducing algorithms leave every rank with
// bitwise-identical results (each element is combined in one place, or in the
// same order everywhere); `avg` is divided afterwards by the communicator.
#pragma once

#include <string_view>

#include "braid/comm/algorithms/group.h"

namespace braid::comm {

class SharedArena;

enum class Algorithm : uint8_t {
  automatic,           // chosen by the cost model
  ring,                // 2(p-1) alpha + 2(p-1)/p n beta
  recursive_doubling,  // log p alpha + n log p beta
  halving_doubling,    // Rabenseifner: 2 log p alpha + 2(p-1)/p n beta
  binary_tree,         // 2 log p alpha + 2 n beta (pipelined)
  double_binary_tree,  // 2 log p alpha + n beta (pipelined, two trees)
  binary_blocks,       // halving-doubling inside power-of-two blocks, blocks chained
  direct,              // star through rank 0: 2 (p-1) (alpha + n beta) at the root
  hierarchical,        // intra-host reduce, inter-host all-reduce, intra-host broadcast
  shared_memory,       // ranks of one host, through a shared arena: 2 n/c syncs + memory copies
};

inline constexpr Algorithm kAllreduceAlgorithms[] = {
    Algorithm::ring, Algorithm::recursive_doubling, Algorithm::halving_doubling,
    Algorithm::binary_tree, Algorithm::double_binary_tree, Algorithm::binary_blocks,
    Algorithm::direct, Algorithm::hierarchical, Algorithm::shared_memory};

std::string_view name(Algorithm a);
// "auto", "ring", "recursive_doubling", ...; throws ValueError otherwise.
Algorithm parse_algorithm(std::string_view s);

// ---- all-reduce (args.data holds the full vector on every rank) -------------
// finish: also apply finish_reduction (avg's division), chunk by chunk as
// each is reduced for the last time and still in cache, instead of in a pass
// over the whole result afterwards (the same rounding: one multiply each).
void ring_allreduce(Group& g, const ReduceArgs& args, bool finish = false);
void recursive_doubling_allreduce(Group& g, const ReduceArgs& args);
void halving_doubling_allreduce(Group& g, const ReduceArgs& args);
void binary_tree_allreduce(Group& g, const ReduceArgs& args);
void double_binary_tree_allreduce(Group& g, const ReduceArgs& args);
void binary_blocks_allreduce(Group& g, const ReduceArgs& args);
void direct_allreduce(Group& g, const ReduceArgs& args);
// Through memory every rank of the group maps (ranks of one host); finish as above.
void shared_memory_allreduce(Group& g, SharedArena& arena, const ReduceArgs& args, bool finish);

// ---- pieces ------------------------------------------------------------------
// args.data is p segments (Partition{count, p}); afterwards segment rank() is
// the reduction of everyone's segment rank() (finished, as above, if
// `finish`); other segments are clobbered.
void ring_reduce_scatter(Group& g, const ReduceArgs& args, bool finish = false);
// data is p segments of seg elements of `elem` bytes; segment rank() is
// filled in; afterwards every segment holds its owner's data.
void ring_allgather(Group& g, std::byte* data, Partition seg, size_t elem, size_t chunk_bytes);
// data holds p blocks back to back, block i of block_bytes[i] bytes (known to
// every rank); block rank() is filled in; afterwards every block holds its
// owner's data. (p-1) alpha + (N - n_rank) beta (ring_allgatherv.cc).
void ring_allgatherv(Group& g, std::byte* data, std::span<const size_t> block_bytes, size_t chunk_bytes);
// Binomial tree, ceil(log p) alpha + ceil(log p) n beta.
void binomial_broadcast(Group& g, std::span<std::byte> data, int root);
// Binomial tree, result on root only; other ranks' data is clobbered.
void binomial_reduce(Group& g, const ReduceArgs& args, int root);
// Root receives p blocks (block i = rank i's `mine`) into `all`; (p-1) alpha + (p-1) n beta at the root.
void direct_gather(Group& g, std::span<const std::byte> mine, std::span<std::byte> all, int root);
// Root sends block i of `all` to rank i.
void direct_scatter(Group& g, std::span<const std::byte> all, std::span<std::byte> mine, int root);
// Block j of `in` goes to rank j, arriving as block rank() of its `out`;
// pairwise exchange, (p-1) alpha + (p-1)/p n beta.
void pairwise_alltoall(Group& g, std::span<const std::byte> in, std::span<std::byte> out);
// The same with blocks of any size: block j of `in` (send_bytes[j]) goes to
// rank j, block i of `out` (recv_bytes[i], what rank i sends here) comes from
// rank i; blocks back to back in rank order. (p-1) alpha + the bytes sent.
void pairwise_alltoallv(Group& g, std::span<const std::byte> in, std::span<const size_t> send_bytes,
                        std::span<std::byte> out, std::span<const size_t> recv_bytes);
// Dissemination barrier: ceil(log p) rounds of one empty message.
void dissemination_barrier(Group& g);

}  // namespace braid::comm
