#include "braid/parallel/zero/layout.h"

#include <algorithm>

#include "braid/base/error.h"

namespace braid::parallel::zero {

Layout::Layout(const std::vector<int64_t>& numels, const std::vector<std::vector<size_t>>& groups, int ranks)
    : ranks_(ranks), bucket_of_(numels.size(), SIZE_MAX), offset_of_(numels.size(), 0) {
  if (ranks < 1) fail<ValueError>("zero layout: {} ranks", ranks);
  for (const auto& g : groups) {
    Bucket b;
    for (size_t i : g) {
      if (i >= numels.size() || bucket_of_[i] != SIZE_MAX) {
        fail<ValueError>("zero layout: parameter {} is out of range or in two buckets", i);
      }
      bucket_of_[i] = buckets_.size();
      offset_of_[i] = b.numel;
      b.params.push_back(i);
      b.offsets.push_back(b.numel);
      b.numel += numels[i];
    }
    b.piece = (b.numel + ranks - 1) / ranks;
    b.padded = b.piece * ranks;
    buckets_.push_back(std::move(b));
  }
  for (size_t i = 0; i < numels.size(); ++i) {
    if (bucket_of_[i] == SIZE_MAX) fail<ValueError>("zero layout: parameter {} is in no bucket", i);
  }
}

std::vector<OwnedSlice> Layout::owned(int rank) const {
  std::vector<OwnedSlice> out;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const Bucket& b = buckets_[bi];
    const int64_t lo = b.piece * rank, hi = lo + b.piece;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const int64_t start = b.offsets[k];
      const int64_t end = k + 1 < b.params.size() ? b.offsets[k + 1] : b.numel;
      const int64_t from = std::max(lo, start), to = std::min(hi, end);
      if (from < to) out.push_back({b.params[k], bi, from - start, to - start, from - lo});
    }
  }
  return out;
}

int64_t Layout::piece_elements() const {
  int64_t n = 0;
  for (const Bucket& b : buckets_) n += b.piece;
  return n;
}

std::vector<std::vector<size_t>> buckets_by_size(const std::vector<int64_t>& numels, size_t bucket_bytes,
                                                 size_t itemsize) {
  std::vector<std::vector<size_t>> groups;
  size_t bytes = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    if (groups.empty() || bytes >= bucket_bytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += static_cast<size_t>(numels[k]) * itemsize;
  }
  return groups;
}

}  // namespace braid::parallel::zero
