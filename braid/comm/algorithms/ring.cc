// Ring reduce-scatter, all-gather and all-reduce (Patarasuk & Yuan), chunked
// and pipelined.
//
// The buffer is cut into p segments; each segment into m chunks. In step s of
// the reduce-scatter, rank r sends segment (r-s-1) to r+1 and reduces segment
// (r-s-2) arriving from r-1; a chunk is forwarded the moment it is reduced, so
// the send of step s+1 overlaps the receive of step s.
//
// Cost (n bytes, p ranks, alpha per message, beta per byte, gamma per reduced byte):
//   reduce-scatter: (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma
//   all-gather:     (p-1) alpha + (p-1)/p n beta
//   all-reduce:   2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
// Bandwidth-optimal; latency grows linearly in p. Chunking adds (m-1) alpha per
// step in exchange for overlapping transfer with reduction.
#include <algorithm>
#include <deque>

#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

namespace {

struct RingShape {
  Partition seg;  // elements per segment
  size_t chunks;  // chunks per segment (same for all segments)
  size_t elem;    // bytes per element

  RingShape(size_t count, int p, size_t elem_bytes, size_t chunk_bytes)
      : seg{count, static_cast<size_t>(p)}, elem(elem_bytes) {
    const size_t chunk_elems = std::max<size_t>(1, chunk_bytes / elem);
    chunks = std::max<size_t>(1, (seg.size(0) + chunk_elems - 1) / chunk_elems);
  }
  // Element range [offset, offset + size) of chunk j of segment i.
  size_t offset(size_t i, size_t j) const { return seg.offset(i) + Partition{seg.size(i), chunks}.offset(j); }
  size_t size(size_t i, size_t j) const { return Partition{seg.size(i), chunks}.size(j); }
};

size_t mod(long a, int p) { return static_cast<size_t>(((a % p) + p) % p); }

}  // namespace

void ring_reduce_scatter(Group& g, const ReduceArgs& a, bool finish) {
  const int p = g.size(), r = g.rank();
  if (p == 1) {
    if (finish) finish_reduction(a.dtype, a.op, a.data, a.count, p);
    return;
  }
  const RingShape sh(a.count, p, itemsize(a.dtype), a.chunk_bytes);
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const size_t seg_bytes = sh.seg.size(0) * sh.elem;
  std::span<std::byte> slots = g.scratch().get(2 * seg_bytes);
  // Receive slots: two segment-sized halves (step parity); chunk j of any
  // segment fits at chunk j's offset in the largest segment.
  auto slot = [&](int s, size_t j) {
    return slots.data() + (s % 2) * seg_bytes + Partition{sh.seg.size(0), sh.chunks}.offset(j) * sh.elem;
  };
  auto send_seg = [&](int s) { return mod(r - s - 1, p); };
  auto recv_seg = [&](int s) { return mod(r - s - 2, p); };

  std::deque<std::pair<Work, int>> sends;  // (work, peer)
  std::vector<Work> recvs(sh.chunks);
  auto post_recv = [&](int s, size_t j) {
    recvs[j] = g.recv(prev, {slot(s, j), sh.size(recv_seg(s), j) * sh.elem});
  };
  auto post_send = [&](int s, size_t j) {
    const size_t i = send_seg(s);
    sends.emplace_back(g.send(next, {a.at(sh.offset(i, j)), sh.size(i, j) * sh.elem}), next);
  };
  for (size_t j = 0; j < sh.chunks; ++j) post_recv(0, j);
  for (size_t j = 0; j < sh.chunks; ++j) post_send(0, j);
  for (int s = 0; s + 1 < p; ++s) {
    const size_t i = recv_seg(s);
    for (size_t j = 0; j < sh.chunks; ++j) {
      g.wait(recvs[j], prev);
      reduce_into(a.dtype, a.op, a.at(sh.offset(i, j)), slot(s, j), sh.size(i, j));
      if (finish && s + 2 == p) finish_reduction(a.dtype, a.op, a.at(sh.offset(i, j)), sh.size(i, j), p);
      if (s + 2 < p) {
        post_recv(s + 1, j);  // slot (s+1)%2 chunk j was consumed in step s-1
        post_send(s + 1, j);  // segment i is what step s+1 forwards
      }
      while (!sends.empty() && sends.front().first.done()) sends.pop_front();
    }
  }
  for (auto& [w, peer] : sends) g.wait(w, peer);
}

void ring_allgather(Group& g, std::byte* data, Partition seg, size_t elem, size_t chunk_bytes) {
  const int p = g.size(), r = g.rank();
  if (p == 1) return;
  const RingShape sh(seg.count, p, elem, chunk_bytes);
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  auto region = [&](size_t i, size_t j) {
    return std::span<std::byte>(data + sh.offset(i, j) * elem, sh.size(i, j) * elem);
  };
  // Step s: send segment (r-s), receive segment (r-s-1) straight into place.
  std::vector<Work> recvs;
  recvs.reserve((p - 1) * sh.chunks);
  for (int s = 0; s + 1 < p; ++s)
    for (size_t j = 0; j < sh.chunks; ++j) recvs.push_back(g.recv(prev, region(mod(r - s - 1, p), j)));
  std::vector<Work> sends;
  sends.reserve((p - 1) * sh.chunks);
  for (size_t j = 0; j < sh.chunks; ++j) sends.push_back(g.send(next, region(r, j)));
  for (int s = 0; s + 1 < p; ++s) {
    for (size_t j = 0; j < sh.chunks; ++j) {
      g.wait(recvs[s * sh.chunks + j], prev);
      if (s + 2 < p) sends.push_back(g.send(next, region(mod(r - s - 1, p), j)));
    }
  }
  for (auto& w : sends) g.wait(w, next);
}

void ring_allreduce(Group& g, const ReduceArgs& a, bool finish) {
  ring_reduce_scatter(g, a, finish);
  ring_allgather(g, a.data, Partition{a.count, static_cast<size_t>(g.size())}, itemsize(a.dtype),
                 a.chunk_bytes);
}

}  // namespace braid::comm
