#include "braid/comm/algorithms/tree_engine.h"

#include <algorithm>
#include <vector>

namespace braid::comm {

TreeRole heap_tree_role(int p, int rank, bool mirrored) {
  auto to_rank = [&](int node) { return mirrored ? p - 1 - node : node; };
  const int node = mirrored ? p - 1 - rank : rank;
  TreeRole role;
  if (node > 0) role.parent = to_rank((node - 1) / 2);
  for (int k = 0; k < 2; ++k)
    if (2 * node + 1 + k < p) role.children[k] = to_rank(2 * node + 1 + k);
  return role;
}

namespace {

struct JobState {
  const TreeJob* job;
  Partition chunks;  // of the job's elements
  std::byte* child_buf[2] = {nullptr, nullptr};
  std::vector<Work> child_recvs[2];
  std::vector<Work> parent_recvs;
};

}  // namespace

void tree_allreduce(Group& g, const ReduceArgs& a, std::span<const TreeJob> jobs) {
  const size_t elem = itemsize(a.dtype);
  // Scratch: one slice-sized buffer per child per job.
  size_t scratch_bytes = 0;
  for (const TreeJob& j : jobs) scratch_bytes += 2 * j.count * elem;
  std::byte* scratch = g.scratch().get(scratch_bytes).data();

  std::vector<JobState> st;
  size_t max_chunks = 0;
  for (const TreeJob& j : jobs) {
    const size_t n = std::max<size_t>(1, (j.count * elem + a.chunk_bytes - 1) / std::max<size_t>(1, a.chunk_bytes));
    JobState s{&j, Partition{j.count, n}, {}, {}, {}};
    for (int k = 0; k < 2; ++k) {
      s.child_buf[k] = scratch;
      scratch += j.count * elem;
    }
    max_chunks = std::max(max_chunks, n);
    st.push_back(std::move(s));
  }
  auto chunk = [&](std::byte* base, const JobState& s, size_t c) {
    return std::span<std::byte>(base + s.chunks.offset(c) * elem, s.chunks.size(c) * elem);
  };
  auto data_of = [&](const JobState& s) { return a.at(s.job->offset); };

  // Up: every child chunk is posted at once; chunk c is combined (own, then
  // child 0, then child 1: one fixed order) and forwarded as soon as it lands.
  for (JobState& s : st)
    for (int k = 0; k < 2; ++k)
      if (s.job->role.children[k] >= 0)
        for (size_t c = 0; c < s.chunks.parts; ++c)
          s.child_recvs[k].push_back(g.recv(s.job->role.children[k], chunk(s.child_buf[k], s, c), s.job->lane));
  std::vector<std::pair<Work, int>> sends;
  for (size_t c = 0; c < max_chunks; ++c) {
    for (JobState& s : st) {
      if (c >= s.chunks.parts) continue;
      const TreeRole& role = s.job->role;
      for (int k = 0; k < 2; ++k) {
        if (role.children[k] < 0) continue;
        g.wait(s.child_recvs[k][c], role.children[k]);
        reduce_into(a.dtype, a.op, chunk(data_of(s), s, c).data(), chunk(s.child_buf[k], s, c).data(),
                    s.chunks.size(c));
      }
      if (role.parent >= 0) sends.emplace_back(g.send(role.parent, chunk(data_of(s), s, c), s.job->lane), role.parent);
    }
  }
  for (auto& [w, peer] : sends) g.wait(w, peer);
  sends.clear();

  // Down: the root's result flows back chunk by chunk.
  for (JobState& s : st)
    if (s.job->role.parent >= 0)
      for (size_t c = 0; c < s.chunks.parts; ++c)
        s.parent_recvs.push_back(g.recv(s.job->role.parent, chunk(data_of(s), s, c), s.job->lane));
  for (size_t c = 0; c < max_chunks; ++c) {
    for (JobState& s : st) {
      if (c >= s.chunks.parts) continue;
      const TreeRole& role = s.job->role;
      if (role.parent >= 0) g.wait(s.parent_recvs[c], role.parent);
      for (int k = 0; k < 2; ++k)
        if (role.children[k] >= 0)
          sends.emplace_back(g.send(role.children[k], chunk(data_of(s), s, c), s.job->lane), role.children[k]);
    }
  }
  for (auto& [w, peer] : sends) g.wait(w, peer);
}

}  // namespace braid::comm
