// Trees as comm/algorithms moves them: the (double) binary tree all-reduce of
// tree_engine.cc and the binomial broadcast and reduce of binomial.cc.
#include <cmath>

#include <fmt/format.h>

#include "braid/comm/algorithms/tree_engine.h"
#include "braid/sim/collective_moves.h"

namespace braid::sim {

namespace {

// CommOptions::chunk_bytes' default. The trees are modelled chunk by chunk
// (their pipelining is what makes them competitive): k = ceil(part / c)
// chunks climb and descend in lock-step, each a message of its own.
constexpr double kChunkBytes = 256.0 * 1024;

struct TreeJob {
  bool mirrored;  // heap_tree_role's second tree
  double bytes;   // this tree's part of the vector
};

// tree_engine.cc: up, each rank combines chunk c from its children (child 0,
// then child 1) and sends it to its parent; once all its up-sends are done,
// down, each rank forwards chunk c from its parent to its children. Jobs
// (trees) interleave chunk by chunk on every rank's one thread, so in the
// double tree a rank's chunk c+1 in one tree waits for its chunk c in the
// other, as in braid.
//
// Closed form, one tree over p = 2^(d+1) - 1 ranks (complete), k chunks of
// c bytes, idealised links: 2 (d + k - 1) (alpha + 2 c beta): a parent's
// port carries both children's chunks at once.
std::vector<After> tree_allreduce(Moves& m, std::vector<After> at, const std::vector<TreeJob>& jobs) {
  const int p = m.size();
  if (p == 1) return at;
  const size_t nj = jobs.size();
  std::vector<std::vector<comm::TreeRole>> role(nj, std::vector<comm::TreeRole>(p));
  std::vector<double> chunks(nj), chunk(nj);
  size_t most = 0;
  for (size_t j = 0; j < nj; ++j) {
    for (int r = 0; r < p; ++r) role[j][r] = comm::heap_tree_role(p, r, jobs[j].mirrored);
    chunks[j] = std::max(1.0, std::ceil(jobs[j].bytes / kChunkBytes));
    chunk[j] = jobs[j].bytes / chunks[j];
    most = std::max(most, static_cast<size_t>(chunks[j]));
  }
  // Node u of a heap tree has children 2u+1 and 2u+2, so going from the last
  // node to the first meets every child before its parent.
  auto rank_of = [&](size_t j, int node) { return jobs[j].mirrored ? p - 1 - node : node; };

  // sent[j][r]: r's latest message of tree j (up: to its parent; down: from its parent).
  std::vector<std::vector<TaskId>> sent(nj, std::vector<TaskId>(p, -1));
  for (size_t c = 0; c < most; ++c) {
    const std::string name = m.name(fmt::format("up chunk {}", c));
    for (size_t j = 0; j < nj; ++j) {
      if (c >= chunks[j]) continue;
      for (int node = p - 1; node >= 0; --node) {
        const int r = rank_of(j, node);
        for (int child : role[j][r].children) {
          if (child < 0) continue;
          m.wait(at[r], sent[j][child]);
          at[r] = m.reduce(r, chunk[j], std::move(at[r]), name);
        }
        if (role[j][r].parent >= 0) sent[j][r] = m.send(r, role[j][r].parent, chunk[j], at[r], name);
      }
    }
  }
  for (size_t j = 0; j < nj; ++j)
    for (int r = 0; r < p; ++r)
      if (sent[j][r] >= 0) m.wait(at[r], sent[j][r]);

  std::vector<std::vector<After>> down(nj, std::vector<After>(p));  // per tree and rank: its last messages down
  for (size_t c = 0; c < most; ++c) {
    const std::string name = m.name(fmt::format("down chunk {}", c));
    for (size_t j = 0; j < nj; ++j) {
      if (c >= chunks[j]) continue;
      for (int node = 0; node < p; ++node) {
        const int r = rank_of(j, node);
        if (role[j][r].parent >= 0) m.wait(at[r], sent[j][r]);
        down[j][r].clear();
        for (int child : role[j][r].children) {
          if (child < 0) continue;
          sent[j][child] = m.send(r, child, chunk[j], at[r], name);
          down[j][r].push_back(sent[j][child]);
        }
      }
    }
  }
  for (size_t j = 0; j < nj; ++j)
    for (int r = 0; r < p; ++r)
      for (TaskId t : down[j][r]) m.wait(at[r], t);
  return at;
}

int lowbit_or_top(int v, int p) {
  int mask = 1;
  while (mask < p && (v & mask) == 0) mask <<= 1;
  return mask;  // for v == 0 the first power of two >= p
}

}  // namespace

std::vector<After> binary_tree_allreduce(Moves& m, std::vector<After> in) {
  return tree_allreduce(m, std::move(in), {{false, m.bytes()}});
}

std::vector<After> double_binary_tree_allreduce(Moves& m, std::vector<After> in) {
  return tree_allreduce(m, std::move(in), {{false, m.bytes() / 2}, {true, m.bytes() / 2}});
}

// With v = (rank - root) mod p, v receives from v - lowbit(v) and sends to
// v + 2^k for every 2^k < lowbit(v), largest first.
//
// A rank's sends go one after another in that order, not all at once: that is
// the binomial tree's ceil(log2 p) (alpha + n beta) (binomial.cc). braid posts
// them together and its transport streams them side by side, which delivers
// the largest subtree's copy late; the sequential model is the algorithm as
// its cost is stated.
std::vector<After> binomial_broadcast(Moves& m, std::vector<After> at, int root) {
  const int p = m.size();
  auto real = [&](int v) { return (v + root) % p; };
  std::vector<TaskId> got(p, -1);  // by v: the message from v's parent
  for (int v = 0; v < p; ++v) {
    const int r = real(v), low = lowbit_or_top(v, p);
    if (v != 0) m.wait(at[r], got[v]);
    TaskId previous = -1;
    for (int mask = low >> 1; mask >= 1; mask >>= 1) {
      if (v + mask >= p) continue;
      const std::string name = m.name(fmt::format("to +{}", mask));
      previous = got[v + mask] = m.send(r, real(v + mask), m.bytes(), previous < 0 ? at[r] : After{previous}, name);
    }
    if (previous >= 0) m.wait(at[r], previous);
  }
  return at;
}

// The broadcast's tree backwards: v takes in v+1, v+2, v+4, ... in that
// order, then sends the sum to its parent.
std::vector<After> binomial_reduce(Moves& m, std::vector<After> at, int root) {
  const int p = m.size();
  auto real = [&](int v) { return (v + root) % p; };
  std::vector<TaskId> sent(p, -1);  // by v: its message to its parent
  for (int v = p - 1; v >= 0; --v) {
    const int r = real(v), low = lowbit_or_top(v, p);
    for (int mask = 1; mask < low; mask <<= 1) {
      if (v + mask >= p) continue;
      m.wait(at[r], sent[v + mask]);
      at[r] = m.reduce(r, m.bytes(), std::move(at[r]), m.name(fmt::format("from +{}", mask)));
    }
    if (v != 0) {
      sent[v] = m.send(r, real(v - low), m.bytes(), at[r], m.name(fmt::format("to -{}", low)));
      at[r] = {sent[v]};
    }
  }
  return at;
}

}  // namespace braid::sim
