// Recursive halving-doubling all-reduce (Rabenseifner): a reduce-scatter by
// recursive halving (each round swaps half of the current range with the rank
// 2^k away and keeps the other half), then an all-gather by recursive doubling
// that retraces the rounds backwards.
//
// Cost (p a power of two): 2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
// Bandwidth-optimal like ring with logarithmic latency; for non-powers of two
// the fold (pow2_fold.h) adds 2 alpha + 2 n beta, which binary blocks avoids.
#include "braid/comm/algorithms/halving_doubling.h"

#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/algorithms/pow2_fold.h"

namespace braid::comm {

namespace {
std::span<std::byte> segments(std::byte* data, const Partition& seg, size_t elem, size_t lo, size_t hi) {
  return {data + seg.offset(lo) * elem, (seg.offset(hi) - seg.offset(lo)) * elem};
}
}  // namespace

void halving_reduce_scatter(Group& g, const ReduceArgs& a, const Pow2Set& set) {
  const size_t elem = itemsize(a.dtype);
  const Partition seg{a.count, static_cast<size_t>(set.p2)};
  std::span<std::byte> tmp = g.scratch().get(segments(a.data, seg, elem, 0, set.p2 / 2).size());
  // The kept range [lo, hi) of segments halves each round and ends as {core}.
  size_t lo = 0, hi = static_cast<size_t>(set.p2);
  for (int mask = set.p2 / 2; mask >= 1; mask >>= 1) {
    const int peer = set.real(set.core ^ mask);
    const size_t mid = lo + (hi - lo) / 2;
    const bool low = (set.core & mask) == 0;
    auto keep = low ? segments(a.data, seg, elem, lo, mid) : segments(a.data, seg, elem, mid, hi);
    auto give = low ? segments(a.data, seg, elem, mid, hi) : segments(a.data, seg, elem, lo, mid);
    g.sendrecv(peer, give, peer, tmp.first(keep.size()));
    reduce_into(a.dtype, a.op, keep.data(), tmp.data(), keep.size() / elem);
    (low ? hi : lo) = mid;
  }
}

void doubling_allgather(Group& g, std::byte* data, size_t count, size_t elem, const Pow2Set& set) {
  const Partition seg{count, static_cast<size_t>(set.p2)};
  size_t lo = static_cast<size_t>(set.core), hi = lo + 1;
  for (int mask = 1; mask < set.p2; mask <<= 1) {
    const int peer = set.real(set.core ^ mask);
    const size_t width = hi - lo;
    const size_t plo = (set.core & mask) == 0 ? hi : lo - width;
    g.sendrecv(peer, segments(data, seg, elem, lo, hi), peer, segments(data, seg, elem, plo, plo + width));
    lo = std::min(lo, plo);
    hi = lo + 2 * width;
  }
}

void halving_doubling_allreduce(Group& g, const ReduceArgs& a) {
  if (g.size() == 1) return;
  const Pow2Fold f(g);
  f.fold_in(g, a);
  if (f.core >= 0) {
    const Pow2Set set{f.p2, f.core, [&f](int c) { return f.real(c); }};
    halving_reduce_scatter(g, a, set);
    doubling_allgather(g, a.data, a.count, itemsize(a.dtype), set);
  }
  f.fold_out(g, a);
}

}  // namespace braid::comm
