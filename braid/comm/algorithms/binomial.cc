// Binomial-tree broadcast and reduce. With v = (rank - root) mod p, rank v
// receives from v - lowbit(v) and sends to v + 2^k for every 2^k < lowbit(v)
// (broadcast); reduce runs the same tree backwards.
//
// Cost: ceil(log2 p) (alpha + n beta) (+ n gamma per round for reduce).
// Latency-optimal for small n; for large n a pipelined ring or scatter +
// all-gather would win, which the chooser does not use for these two ops yet.
#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

namespace {
int lowbit_or_top(int v, int p) {
  int mask = 1;
  while (mask < p && (v & mask) == 0) mask <<= 1;
  return mask;  // for v == 0 the first power of two >= p
}
}  // namespace

void binomial_broadcast(Group& g, std::span<std::byte> data, int root) {
  const int p = g.size();
  if (p == 1) return;
  const int v = (g.rank() - root + p) % p;
  auto real = [&](int u) { return (u + root) % p; };
  const int low = lowbit_or_top(v, p);
  if (v != 0) g.wait(g.recv(real(v - low), data), real(v - low));
  std::vector<std::pair<Work, int>> sends;
  for (int mask = low >> 1; mask >= 1; mask >>= 1)
    if (v + mask < p) sends.emplace_back(g.send(real(v + mask), data), real(v + mask));
  for (auto& [w, peer] : sends) g.wait(w, peer);
}

void binomial_reduce(Group& g, const ReduceArgs& a, int root) {
  const int p = g.size();
  if (p == 1) return;
  const int v = (g.rank() - root + p) % p;
  auto real = [&](int u) { return (u + root) % p; };
  const int low = lowbit_or_top(v, p);
  std::span<std::byte> tmp = g.scratch().get(a.bytes());
  // Children in increasing distance: v+1, v+2, v+4, ... (the reverse of broadcast).
  for (int mask = 1; mask < low; mask <<= 1) {
    if (v + mask >= p) continue;
    g.wait(g.recv(real(v + mask), tmp), real(v + mask));
    reduce_into(a.dtype, a.op, a.data, tmp.data(), a.count);
  }
  if (v != 0) g.wait(g.send(real(v - low), {a.data, a.bytes()}), real(v - low));
}

}  // namespace braid::comm
