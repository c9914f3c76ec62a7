// The power-of-two all-reduces as comm/algorithms moves them: recursive
// doubling and halving-doubling (with pow2_fold.h's fold for other group
// sizes) and binary blocks (binary_blocks.cc). Segments are n/p' bytes of the
// power-of-two core p'; a round's two messages go both ways at once.
//
// Closed forms on idealised links, p a power of two:
//   recursive doubling  log2 p (alpha + n beta + n gamma)
//   halving-doubling    2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
#include <fmt/format.h>

#include "braid/comm/algorithms/group.h"
#include "braid/sim/collective_moves.h"

namespace braid::sim {

namespace {

// A power-of-two set of group ranks: member c is group rank at[c].
using Pow2Set = std::vector<int>;

// pow2_fold.h: with p' = floor_pow2(p) and e = p - p', group ranks 0..2e-1
// pair up; each even one hands its vector to the odd one and sits the core
// phase out. The core is the odd ones, then ranks 2e..p-1.
struct Fold {
  int p2, extra;
  explicit Fold(int p) : p2(comm::floor_pow2(p)), extra(p - p2) {}
  Pow2Set core() const {
    Pow2Set set(p2);
    for (int c = 0; c < p2; ++c) set[c] = c < extra ? 2 * c + 1 : c + extra;
    return set;
  }
  void in(Moves& m, std::vector<After>& at) const {
    const std::string name = m.name("fold in");
    for (int r = 0; r < 2 * extra; r += 2) {
      const TaskId s = m.send(r, r + 1, m.bytes(), at[r], name);
      at[r] = {s};
      m.wait(at[r + 1], s);
      at[r + 1] = m.reduce(r + 1, m.bytes(), std::move(at[r + 1]), name);
    }
  }
  void out(Moves& m, std::vector<After>& at) const {
    const std::string name = m.name("fold out");
    for (int r = 0; r < 2 * extra; r += 2) {
      const TaskId s = m.send(r + 1, r, m.bytes(), at[r + 1], name);
      at[r + 1] = {s};
      m.wait(at[r], s);
    }
  }
};

// One round of a power-of-two set: member c swaps `bytes` with c ^ mask,
// then reduces `reduced` bytes of what it got (0: gathers, no reduction).
void exchange(Moves& m, std::vector<After>& at, const Pow2Set& set, int mask, double bytes, double reduced,
              const std::string& name) {
  std::vector<TaskId> sent(set.size());
  for (size_t c = 0; c < set.size(); ++c) sent[c] = m.send(set[c], set[c ^ mask], bytes, at[set[c]], name);
  for (size_t c = 0; c < set.size(); ++c) {
    After& a = at[set[c]];
    a = {sent[c], sent[c ^ mask]};  // sendrecv: both done; the send came after everything before
    if (reduced > 0) a = m.reduce(set[c], reduced, std::move(a), name);
  }
}

// Recursive halving: afterwards member c holds segment c of n/|set| bytes, reduced.
void halving_reduce_scatter(Moves& m, std::vector<After>& at, const Pow2Set& set, const std::string& what) {
  const double seg = m.bytes() / static_cast<double>(set.size());
  for (int mask = static_cast<int>(set.size()) / 2, round = 0; mask >= 1; mask >>= 1, ++round) {
    exchange(m, at, set, mask, mask * seg, mask * seg, m.name(fmt::format("{} halving {}", what, round)));
  }
}

// Recursive doubling: member c contributes segment c and ends with all.
void doubling_allgather(Moves& m, std::vector<After>& at, const Pow2Set& set, const std::string& what) {
  const double seg = m.bytes() / static_cast<double>(set.size());
  for (int mask = 1, round = 0; mask < static_cast<int>(set.size()); mask <<= 1, ++round) {
    exchange(m, at, set, mask, mask * seg, 0, m.name(fmt::format("{} doubling {}", what, round)));
  }
}

}  // namespace

std::vector<After> recursive_doubling_allreduce(Moves& m, std::vector<After> at) {
  if (m.size() == 1) return at;
  const Fold fold(m.size());
  fold.in(m, at);
  const Pow2Set set = fold.core();
  for (int mask = 1, round = 0; mask < fold.p2; mask <<= 1, ++round) {
    exchange(m, at, set, mask, m.bytes(), m.bytes(), m.name(fmt::format("round {}", round)));
  }
  fold.out(m, at);
  return at;
}

std::vector<After> halving_doubling_allreduce(Moves& m, std::vector<After> at) {
  if (m.size() == 1) return at;
  const Fold fold(m.size());
  fold.in(m, at);
  const Pow2Set set = fold.core();
  halving_reduce_scatter(m, at, set, "reduce-scatter");
  doubling_allgather(m, at, set, "allgather");
  fold.out(m, at);
  return at;
}

// binary_blocks.cc: blocks of 2^k0 > 2^k1 > ... consecutive ranks (p's binary
// digits). Each block reduce-scatters; partial segments cascade from the
// smallest block up to the largest (each rank sends the overlap of its
// segment with each segment of the next larger block, which adds it in);
// the results cascade back down, and each block all-gathers.
std::vector<After> binary_blocks_allreduce(Moves& m, std::vector<After> at) {
  const int p = m.size();
  if (p == 1) return at;
  std::vector<Pow2Set> blocks;
  for (int bit = 30, base = 0; bit >= 0; --bit) {
    if (!(p & (1 << bit))) continue;
    blocks.emplace_back(1 << bit);
    for (int c = 0; c < (1 << bit); ++c) blocks.back()[c] = base + c;
    base += 1 << bit;
  }
  // Bytes shared by segment j of a block of s1 and segment k of one of s2
  // (integer bounds, so an empty overlap is exactly empty).
  auto overlap = [&](int j, int s1, int k, int s2) {
    const int64_t lo = std::max<int64_t>(int64_t{j} * s2, int64_t{k} * s1);
    const int64_t hi = std::min<int64_t>(int64_t{j + 1} * s2, int64_t{k + 1} * s1);
    return hi > lo ? m.bytes() * static_cast<double>(hi - lo) / (static_cast<double>(s1) * s2) : 0.0;
  };
  const int nb = static_cast<int>(blocks.size());
  for (int b = 0; b < nb; ++b) halving_reduce_scatter(m, at, blocks[b], fmt::format("block {} reduce-scatter", b));

  // Up, smallest block first: receive the smaller block's partials, add them
  // in, then pass ours to the larger block.
  struct Message {
    TaskId task;
    double bytes;
  };
  std::vector<std::vector<Message>> inbox(p);  // to each rank, in the order it takes them
  const std::string up = m.name("up");
  for (int b = nb - 1; b >= 0; --b) {
    const int s1 = static_cast<int>(blocks[b].size());
    for (int j = 0; j < s1; ++j) {
      const int me = blocks[b][j];
      for (const Message& got : inbox[me]) {
        m.wait(at[me], got.task);
        at[me] = m.reduce(me, got.bytes, std::move(at[me]), up);
      }
      if (b == 0) continue;
      const int s2 = static_cast<int>(blocks[b - 1].size());
      After sends;
      for (int k = 0; k < s2; ++k) {
        const double bytes = overlap(j, s1, k, s2);
        if (bytes == 0) continue;
        const TaskId s = m.send(me, blocks[b - 1][k], bytes, at[me], up);
        inbox[blocks[b - 1][k]].push_back({s, bytes});
        sends.push_back(s);
      }
      for (TaskId s : sends) m.wait(at[me], s);
    }
  }
  // Down, largest block first: the final values of each overlap go back.
  const std::string down = m.name("down");
  std::vector<After> from_above(p);
  for (int b = 0; b < nb; ++b) {
    const int s1 = static_cast<int>(blocks[b].size());
    for (int j = 0; j < s1; ++j) {
      const int me = blocks[b][j];
      for (TaskId t : from_above[me]) m.wait(at[me], t);
      if (b + 1 == nb) continue;
      const int s2 = static_cast<int>(blocks[b + 1].size());
      After sends;
      for (int k = 0; k < s2; ++k) {
        const double bytes = overlap(j, s1, k, s2);
        if (bytes == 0) continue;
        const TaskId s = m.send(me, blocks[b + 1][k], bytes, at[me], down);
        from_above[blocks[b + 1][k]].push_back(s);
        sends.push_back(s);
      }
      for (TaskId s : sends) m.wait(at[me], s);
    }
  }
  for (int b = 0; b < nb; ++b) doubling_allgather(m, at, blocks[b], fmt::format("block {} allgather", b));
  return at;
}

}  // namespace braid::sim
