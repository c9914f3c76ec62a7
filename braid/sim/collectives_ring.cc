// Ring reduce-scatter, all-gather and all-reduce as comm/algorithms/ring.cc
// moves them: p segments of n/p bytes; in step s rank r sends one segment to
// r+1 and (reduce-scatter) reduces the one arriving from r-1, which step s+1
// forwards.
//
// Modelled unchunked: braid cuts each segment into 256 KiB chunks so that
// reducing chunk j overlaps receiving chunk j+1; here a step's reduction
// follows its whole segment. On idealised links that gives ring.cc's closed
// forms exactly: 2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
#include <fmt/format.h>

#include "braid/sim/collective_moves.h"

namespace braid::sim {

std::vector<After> ring_reduce_scatter(Moves& m, std::vector<After> at) {
  const int p = m.size();
  if (p == 1) return at;
  const double seg = m.bytes() / p;
  std::vector<TaskId> sent(p), got(p);
  std::string step = m.name("reduce-scatter step 0");
  for (int i = 0; i < p; ++i) sent[i] = m.send(i, (i + 1) % p, seg, at[i], step);
  for (int s = 0; s + 1 < p; ++s) {
    for (int i = 0; i < p; ++i) got[i] = sent[(i + p - 1) % p];
    for (int i = 0; i < p; ++i) {
      m.wait(at[i], got[i]);
      at[i] = m.reduce(i, seg, std::move(at[i]), step);
    }
    if (s + 2 == p) break;
    step = m.name(fmt::format("reduce-scatter step {}", s + 1));
    for (int i = 0; i < p; ++i) sent[i] = m.send(i, (i + 1) % p, seg, at[i], step);
  }
  // The call returns once its sends are done too (earlier ones went before,
  // on the same channel).
  for (int i = 0; i < p; ++i) m.wait(at[i], sent[i]);
  return at;
}

std::vector<After> ring_allgather(Moves& m, std::vector<After> at) {
  const int p = m.size();
  if (p == 1) return at;
  const double seg = m.bytes() / p;
  std::vector<TaskId> sent(p), got(p);
  std::string step = m.name("allgather step 0");
  for (int i = 0; i < p; ++i) sent[i] = m.send(i, (i + 1) % p, seg, at[i], step);
  for (int s = 0; s + 1 < p; ++s) {
    for (int i = 0; i < p; ++i) got[i] = sent[(i + p - 1) % p];
    if (s + 2 == p) break;
    step = m.name(fmt::format("allgather step {}", s + 1));
    // Forwarding the segment that just arrived needs only it: the earlier
    // steps' sends went before it on the same channel.
    for (int i = 0; i < p; ++i) sent[i] = m.send(i, (i + 1) % p, seg, {got[i]}, step);
  }
  // The last message in each direction came after all others on its channel.
  for (int i = 0; i < p; ++i) {
    m.wait(at[i], got[i]);
    m.wait(at[i], sent[i]);
  }
  return at;
}

std::vector<After> ring_allreduce(Moves& m, std::vector<After> in) {
  return ring_allgather(m, ring_reduce_scatter(m, std::move(in)));
}

}  // namespace braid::sim
