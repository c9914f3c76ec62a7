// All-reduce through a SharedArena (ranks of one host): no messages, no
// thread hand-offs. Per chunk of c bytes (the arena's chunk) each rank
//   1. copies its chunk into its slot and announces it (step),
//   2. waits for every rank's step, reduces its 1/p of the chunk across all
//      slots in place in its own slot (finishing avg there, in cache),
//      announces that (step), and copies its part out,
//   3. waits for every rank's second step and copies the other parts out.
// Chunks alternate between the two halves of each slot; a rank reuses a half
// only after every rank announced the next chunk, i.e. finished copying the
// previous one out. Each element is reduced by one rank, so all ranks end
// bitwise equal.
// Cost: 2 ceil(n / c) sync + n/B_mem (copy in) + (p-1)/p n gamma + (p-1)/p n / B_mem
// (copy out), where a sync is one cache-line transfer between cores (~0.1-1
// us) when the peers are already waiting.
#include <algorithm>

#include "braid/base/copy_bytes.h"
#include "braid/comm/algorithms/algorithms.h"
#include "braid/comm/shared_arena.h"

namespace braid::comm {

void shared_memory_allreduce(Group& g, SharedArena& arena, const ReduceArgs& a, bool finish) {
  const int p = g.size(), me = g.rank();
  const size_t item = itemsize(a.dtype);
  const size_t per = arena.chunk() / item;
  arena.declare(a.count, static_cast<uint64_t>(a.dtype) << 8 | static_cast<uint64_t>(a.op));
  size_t start = 0;
  do {  // at least one round, so ranks that disagree about an empty buffer still meet
    const size_t n = std::min(per, a.count - start);
    const int half = static_cast<int>((arena.phase() / 2) & 1);
    std::byte* mine = arena.slot(me, half);
    if (n) copy_bytes(mine, a.at(start), n * item);
    arena.wait_all(g, arena.advance());
    if (start == 0) arena.check_declarations("all-reduce");

    const Partition part{n, static_cast<size_t>(p)};
    const size_t lo = part.offset(me), cnt = part.size(me);
    std::byte* acc = mine + lo * item;
    for (int r = 0; r < p && cnt; ++r) {
      if (r != me) reduce_into(a.dtype, a.op, acc, arena.slot(r, half) + lo * item, cnt);
    }
    if (finish && cnt) finish_reduction(a.dtype, a.op, acc, cnt, p);
    const uint32_t reduced = arena.advance();
    if (cnt) copy_bytes(a.at(start + lo), acc, cnt * item);
    arena.wait_all(g, reduced);
    for (int r = 0; r < p; ++r) {
      if (r == me || part.size(r) == 0) continue;
      copy_bytes(a.at(start + part.offset(r)), arena.slot(r, half) + part.offset(r) * item, part.size(r) * item);
    }
    start += n;
  } while (start < a.count);
}

}  // namespace braid::comm
