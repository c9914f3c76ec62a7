// Binary tree all-reduce: reduce up a heap-shaped binary tree to rank 0, then
// broadcast back down, both pipelined in chunks of c bytes.
//
// Cost: 2 (log2 p + n/c) (alpha + c beta) + n gamma; for large n about
// 2 n beta + 2 n gamma on interior nodes (each sends its chunk up once and to
// two children). Latency logarithmic in p; bandwidth half of ring's, which is
// what the double binary tree recovers.
#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/algorithms/tree_engine.h"

namespace braid::comm {

void binary_tree_allreduce(Group& g, const ReduceArgs& a) {
  if (g.size() == 1) return;
  const TreeJob job{heap_tree_role(g.size(), g.rank(), false), 0, a.count, 0};
  tree_allreduce(g, a, std::span<const TreeJob>(&job, 1));
}

}  // namespace braid::comm
