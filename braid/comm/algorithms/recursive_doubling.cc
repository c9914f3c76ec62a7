// Recursive doubling all-reduce: in round k every core rank swaps its whole
// vector with the rank 2^k away and combines.
//
// Cost (p a power of two): log2 p (alpha + n beta + n gamma). Best for small
// messages, where log p latency terms dominate; sends the whole vector every
// round, so poor for large ones. Non-powers of two fold first (pow2_fold.h).
#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/algorithms/pow2_fold.h"

namespace braid::comm {

void recursive_doubling_allreduce(Group& g, const ReduceArgs& a) {
  if (g.size() == 1) return;
  const Pow2Fold f(g);
  f.fold_in(g, a);
  if (f.core >= 0) {
    std::span<std::byte> all(a.data, a.bytes());
    std::span<std::byte> tmp = g.scratch().get(a.bytes());
    for (int mask = 1; mask < f.p2; mask <<= 1) {
      const int peer = f.real(f.core ^ mask);
      g.sendrecv(peer, all, peer, tmp);
      reduce_into(a.dtype, a.op, a.data, tmp.data(), a.count);
    }
  }
  f.fold_out(g, a);
}

}  // namespace braid::comm
