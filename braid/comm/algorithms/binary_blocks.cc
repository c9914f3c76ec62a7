// Binary-blocks all-reduce (Rabenseifner & Träff 2004) for group sizes that
// are not powers of two. p is split by its binary digits into blocks of
// 2^k0 > 2^k1 > ... ranks (largest first, contiguous ranks). Then:
//   1. each block reduce-scatters the whole vector by recursive halving;
//   2. partial segments cascade from the smallest block up to the largest:
//      each rank sends the overlap of its segment with each segment of the next
//      larger block, which adds it in;
//   3. the largest block now holds the full result, scattered; results cascade
//      back down the same way, and every block all-gathers by recursive doubling.
//
// Cost, with q blocks and s_min the smallest block: (2 log2 p + 2 (q-1)) alpha
// + (2 (p'-1)/p' + 2/s_min) n beta + n gamma roughly, p' the largest block.
// Unlike the power-of-two fold no rank sits idle during the core phase, but
// ranks of small blocks move n/s_min bytes in the cascade, so the benefit is
// largest when the blocks are of similar size (p = 6, 12, ...).
#include <algorithm>
#include <vector>

#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/algorithms/halving_doubling.h"

namespace braid::comm {

namespace {

struct Block {
  int base;  // first group rank
  int size;  // power of two
};

std::vector<Block> blocks_of(int p) {
  std::vector<Block> out;
  int base = 0;
  for (int bit = 30; bit >= 0; --bit)
    if (p & (1 << bit)) {
      out.push_back({base, 1 << bit});
      base += 1 << bit;
    }
  return out;
}

// Overlap of two element ranges.
struct Range {
  size_t lo, hi;
  bool empty() const { return hi <= lo; }
};
Range overlap(Range a, Range b) { return {std::max(a.lo, b.lo), std::min(a.hi, b.hi)}; }
Range segment(size_t count, int parts, int i) {
  const Partition part{count, static_cast<size_t>(parts)};
  return {part.offset(i), part.offset(i) + part.size(i)};
}

constexpr uint16_t kUpLane = 3, kDownLane = 4;

}  // namespace

void binary_blocks_allreduce(Group& g, const ReduceArgs& a) {
  const int p = g.size();
  if (p == 1) return;
  const std::vector<Block> blocks = blocks_of(p);
  int b = 0;
  while (g.rank() >= blocks[b].base + blocks[b].size) ++b;
  const Block me = blocks[b];
  const int j = g.rank() - me.base;
  const size_t elem = itemsize(a.dtype);
  const Pow2Set set{me.size, j, [base = me.base](int c) { return base + c; }};
  const Range mine = segment(a.count, me.size, j);
  auto bytes = [&](Range r) { return std::span<std::byte>(a.at(r.lo), (r.hi - r.lo) * elem); };

  // 1. Reduce-scatter inside the block.
  if (me.size > 1) halving_reduce_scatter(g, a, set);

  // 2. Up: add the next smaller block's partials, then pass ours up.
  if (b + 1 < static_cast<int>(blocks.size())) {
    const Block small = blocks[b + 1];
    std::span<std::byte> tmp = g.scratch().get((mine.hi - mine.lo) * elem);
    for (int k = 0; k < small.size; ++k) {
      const Range o = overlap(mine, segment(a.count, small.size, k));
      if (o.empty()) continue;
      std::span<std::byte> in = tmp.subspan((o.lo - mine.lo) * elem, (o.hi - o.lo) * elem);
      g.wait(g.recv(small.base + k, in, kUpLane), small.base + k);
      reduce_into(a.dtype, a.op, a.at(o.lo), in.data(), o.hi - o.lo);
    }
  }
  if (b > 0) {
    const Block large = blocks[b - 1];
    std::vector<std::pair<Work, int>> sends;
    for (int k = 0; k < large.size; ++k) {
      const Range o = overlap(mine, segment(a.count, large.size, k));
      if (!o.empty()) sends.emplace_back(g.send(large.base + k, bytes(o), kUpLane), large.base + k);
    }
    for (auto& [w, peer] : sends) g.wait(w, peer);

    // 3. Down: the final values of our segment come back from the larger block.
    std::vector<std::pair<Work, int>> recvs;
    for (int k = 0; k < large.size; ++k) {
      const Range o = overlap(mine, segment(a.count, large.size, k));
      if (!o.empty()) recvs.emplace_back(g.recv(large.base + k, bytes(o), kDownLane), large.base + k);
    }
    for (auto& [w, peer] : recvs) g.wait(w, peer);
  }
  if (b + 1 < static_cast<int>(blocks.size())) {
    const Block small = blocks[b + 1];
    std::vector<std::pair<Work, int>> sends;
    for (int k = 0; k < small.size; ++k) {
      const Range o = overlap(mine, segment(a.count, small.size, k));
      if (!o.empty()) sends.emplace_back(g.send(small.base + k, bytes(o), kDownLane), small.base + k);
    }
    for (auto& [w, peer] : sends) g.wait(w, peer);
  }
  if (me.size > 1) doubling_allgather(g, a.data, a.count, elem, set);
}

}  // namespace braid::comm
