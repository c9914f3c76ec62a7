// Ring all-gather of blocks of different sizes (MPI_Allgatherv's semantics).
//
// Every rank knows every block's size beforehand, so a receive always names
// its exact size (the Transport contract) and empty blocks send nothing. In
// step s rank r forwards block (r-s) to r+1 and receives block (r-s-1) from
// r-1 straight into place; blocks are cut into chunk_bytes pieces so a
// forward starts while the rest of a large block is still arriving.
//
// Cost (N = sum of the blocks in bytes, p ranks):
//   (p-1) alpha + (N - n_r) beta at rank r, i.e. every byte but one's own once.
#include <algorithm>

#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

void ring_allgatherv(Group& g, std::byte* data, std::span<const size_t> block_bytes, size_t chunk_bytes) {
  const int p = g.size(), r = g.rank();
  if (p == 1) return;
  std::vector<size_t> offset(static_cast<size_t>(p) + 1, 0);
  for (int i = 0; i < p; ++i) offset[i + 1] = offset[i] + block_bytes[i];
  const size_t piece = std::max<size_t>(1, chunk_bytes);
  auto pieces = [&](size_t block) { return (block_bytes[block] + piece - 1) / piece; };
  auto region = [&](size_t block, size_t j) {
    const size_t begin = j * piece;
    return std::span<std::byte>(data + offset[block] + begin, std::min(piece, block_bytes[block] - begin));
  };
  auto block_at = [&](int s) { return static_cast<size_t>(((r - s) % p + p) % p); };
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  // Post every receive first, so the peer's sends always find one waiting.
  std::vector<std::vector<Work>> recvs(static_cast<size_t>(p));
  for (int s = 0; s + 1 < p; ++s) {
    const size_t b = block_at(s + 1);
    for (size_t j = 0; j < pieces(b); ++j) recvs[s].push_back(g.recv(prev, region(b, j)));
  }
  std::vector<Work> sends;
  for (size_t j = 0; j < pieces(static_cast<size_t>(r)); ++j) sends.push_back(g.send(next, region(r, j)));
  for (int s = 0; s + 1 < p; ++s) {
    const size_t b = block_at(s + 1);
    for (size_t j = 0; j < recvs[s].size(); ++j) {
      g.wait(recvs[s][j], prev);
      if (s + 2 < p) sends.push_back(g.send(next, region(b, j)));
    }
  }
  for (auto& w : sends) g.wait(w, next);
}

}  // namespace braid::comm
