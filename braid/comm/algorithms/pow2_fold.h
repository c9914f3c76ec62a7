// Folding a non-power-of-two group onto its largest power-of-two subset, the
// usual pre/post step of recursive doubling and halving-doubling (Thakur,
// Rabenseifner & Gropp 2005): with p' = floor_pow2(p) and e = p - p' extra
// ranks, ranks 0..2e-1 pair up; each even one hands its vector to the odd one
// and sits the core phase out, then receives the result back.
// Extra cost: 2 alpha + 2 n beta + n gamma on the folded ranks.
#pragma once

#include "braid/comm/algorithms/group.h"

namespace braid::comm {

struct Pow2Fold {
  int p2;     // core group size (power of two)
  int extra;  // p - p2
  int core;   // this rank's index in the core group, -1 if it sits out

  explicit Pow2Fold(const Group& g) : p2(floor_pow2(g.size())), extra(g.size() - p2) {
    const int r = g.rank();
    core = r < 2 * extra ? (r % 2 == 1 ? r / 2 : -1) : r - extra;
  }
  // Group rank of core index c.
  int real(int c) const { return c < extra ? 2 * c + 1 : c + extra; }

  // Pre-step: evens send, odds reduce. Lane 1 keeps these apart from the core phase.
  void fold_in(Group& g, const ReduceArgs& a) const {
    const int r = g.rank();
    if (r >= 2 * extra) return;
    std::span<std::byte> all(a.data, a.bytes());
    if (core < 0) {
      g.wait(g.send(r + 1, all, 1), r + 1);
    } else {
      std::span<std::byte> tmp = g.scratch().get(a.bytes());
      g.wait(g.recv(r - 1, tmp, 1), r - 1);
      reduce_into(a.dtype, a.op, a.data, tmp.data(), a.count);
    }
  }
  // Post-step: odds return the result to evens.
  void fold_out(Group& g, const ReduceArgs& a) const {
    const int r = g.rank();
    if (r >= 2 * extra) return;
    std::span<std::byte> all(a.data, a.bytes());
    if (core < 0) g.wait(g.recv(r + 1, all, 2), r + 1);
    else g.wait(g.send(r - 1, all, 2), r - 1);
  }
};

}  // namespace braid::comm
