// Double binary tree all-reduce (Sanders, Speck & Träff 2009; NCCL 2.4): two
// binary trees, the second the mirror image of the first, so a rank that is a
// leaf in one is interior in the other. Each tree reduces and broadcasts half
// the vector, pipelined in chunks of c bytes, both at once.
//
// Cost: 2 (log2 p + n/(2c)) (alpha + c beta) + n/2 gamma per tree; every rank
// sends and receives about n bytes each way, so bandwidth close to ring's with
// logarithmic latency.
#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/algorithms/tree_engine.h"

namespace braid::comm {

void double_binary_tree_allreduce(Group& g, const ReduceArgs& a) {
  if (g.size() == 1) return;
  const Partition half{a.count, 2};
  const TreeJob jobs[2] = {
      {heap_tree_role(g.size(), g.rank(), false), half.offset(0), half.size(0), 0},
      {heap_tree_role(g.size(), g.rank(), true), half.offset(1), half.size(1), 1},
  };
  tree_allreduce(g, a, jobs);
}

}  // namespace braid::comm
