// Direct (star) collectives: every rank talks to the root, or to every other
// rank, in one step.
//
// all-reduce through rank 0: 2 (p-1) alpha + 2 (p-1) n beta + (p-1) n gamma, all at
// the root; the best choice only for tiny p or tiny n on a fast fabric.
// gather/scatter: (p-1) alpha + (p-1)/p n beta at the root (n = all blocks).
// alltoall (pairwise, round k exchanges with rank +-k): (p-1) alpha + (p-1)/p n beta.
// barrier (dissemination, round k signals rank + 2^k): ceil(log2 p) alpha.
#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

void direct_allreduce(Group& g, const ReduceArgs& a) {
  const int p = g.size();
  if (p == 1) return;
  std::span<std::byte> all(a.data, a.bytes());
  if (g.rank() != 0) {
    Work s = g.send(0, all);
    Work r = g.recv(0, all, 1);
    g.wait(s, 0);
    g.wait(r, 0);
    return;
  }
  // Root: combine in rank order, so the result does not depend on arrival order.
  std::span<std::byte> tmp = g.scratch().get(a.bytes() * (p - 1));
  std::vector<Work> recvs;
  for (int i = 1; i < p; ++i) recvs.push_back(g.recv(i, tmp.subspan((i - 1) * a.bytes(), a.bytes())));
  for (int i = 1; i < p; ++i) {
    g.wait(recvs[i - 1], i);
    reduce_into(a.dtype, a.op, a.data, tmp.data() + (i - 1) * a.bytes(), a.count);
  }
  std::vector<Work> sends;
  for (int i = 1; i < p; ++i) sends.push_back(g.send(i, all, 1));
  for (int i = 1; i < p; ++i) g.wait(sends[i - 1], i);
}

void direct_gather(Group& g, std::span<const std::byte> mine, std::span<std::byte> all, int root) {
  const int p = g.size();
  const size_t b = mine.size();
  if (g.rank() != root) {
    g.wait(g.send(root, mine), root);
    return;
  }
  std::vector<Work> recvs(p);
  for (int i = 0; i < p; ++i)
    if (i != root) recvs[i] = g.recv(i, all.subspan(i * b, b));
  if (b) std::copy(mine.begin(), mine.end(), all.begin() + root * b);
  for (int i = 0; i < p; ++i)
    if (i != root) g.wait(recvs[i], i);
}

void direct_scatter(Group& g, std::span<const std::byte> all, std::span<std::byte> mine, int root) {
  const int p = g.size();
  const size_t b = mine.size();
  if (g.rank() != root) {
    g.wait(g.recv(root, mine), root);
    return;
  }
  std::vector<Work> sends(p);
  for (int i = 0; i < p; ++i)
    if (i != root) sends[i] = g.send(i, all.subspan(i * b, b));
  if (b) std::copy(all.begin() + root * b, all.begin() + (root + 1) * b, mine.begin());
  for (int i = 0; i < p; ++i)
    if (i != root) g.wait(sends[i], i);
}

void pairwise_alltoall(Group& g, std::span<const std::byte> in, std::span<std::byte> out) {
  const int p = g.size(), r = g.rank();
  const size_t b = in.size() / p;
  if (b) std::copy(in.begin() + r * b, in.begin() + (r + 1) * b, out.begin() + r * b);
  for (int k = 1; k < p; ++k) {
    const int to = (r + k) % p, from = (r - k + p) % p;
    g.sendrecv(to, in.subspan(to * b, b), from, out.subspan(from * b, b));
  }
}

void pairwise_alltoallv(Group& g, std::span<const std::byte> in, std::span<const size_t> send_bytes,
                        std::span<std::byte> out, std::span<const size_t> recv_bytes) {
  const int p = g.size(), r = g.rank();
  std::vector<size_t> at_in(static_cast<size_t>(p) + 1, 0), at_out(static_cast<size_t>(p) + 1, 0);
  for (int i = 0; i < p; ++i) {
    at_in[i + 1] = at_in[i] + send_bytes[i];
    at_out[i + 1] = at_out[i] + recv_bytes[i];
  }
  if (send_bytes[r]) std::copy_n(in.begin() + at_in[r], send_bytes[r], out.begin() + at_out[r]);
  for (int k = 1; k < p; ++k) {
    const int to = (r + k) % p, from = (r - k + p) % p;
    g.sendrecv(to, in.subspan(at_in[to], send_bytes[to]), from, out.subspan(at_out[from], recv_bytes[from]));
  }
}

void dissemination_barrier(Group& g) {
  const int p = g.size(), r = g.rank();
  for (int d = 1; d < p; d <<= 1) g.sendrecv((r + d) % p, {}, (r - d + p) % p, {});
}

}  // namespace braid::comm
