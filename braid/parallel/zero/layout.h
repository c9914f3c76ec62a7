// How ZeRO splits a model's parameters over the N ranks of the data axis
// (Rajbhandari et al., 2020): parameters go into buckets of whole tensors,
// each bucket is a flat run of elements padded to a multiple of N, and rank r
// owns piece r of every bucket. A bucket is the unit of communication: its
// gradients are reduce-scattered into the pieces, its parameters all-gathered
// from them. Each parameter lies in one bucket, so a rank's part of it is one
// contiguous run of its elements (possibly empty).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid::parallel::zero {

struct Bucket {
  std::vector<size_t> params;    // parameter indices, in the bucket's order
  std::vector<int64_t> offsets;  // each one's first element in the bucket
  int64_t numel = 0;             // elements of the parameters
  int64_t piece = 0;             // elements per rank: ceil(numel / ranks)
  int64_t padded = 0;            // piece * ranks
};

// The run of parameter `param`'s elements [begin, end) that a rank owns,
// found at `at` in that rank's piece of bucket `bucket`.
struct OwnedSlice {
  size_t param = 0;
  size_t bucket = 0;
  int64_t begin = 0, end = 0;
  int64_t at = 0;
  int64_t numel() const { return end - begin; }
};

class Layout {
 public:
  // `groups`: the parameters of each bucket, in order (every parameter in
  // exactly one); `numels`: each parameter's element count.
  Layout(const std::vector<int64_t>& numels, const std::vector<std::vector<size_t>>& groups, int ranks);

  int ranks() const { return ranks_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  size_t bucket_of(size_t param) const { return bucket_of_.at(param); }
  int64_t offset_of(size_t param) const { return offset_of_.at(param); }
  // The non-empty slices `rank` owns, bucket by bucket.
  std::vector<OwnedSlice> owned(int rank) const;
  // Elements `rank` holds: the sum of every bucket's piece.
  int64_t piece_elements() const;

 private:
  int ranks_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<int64_t> offset_of_;
};

// Groups for gradient buckets: parameters in reverse registration order (the
// order backward finishes them), a new bucket once `bucket_bytes` is reached.
std::vector<std::vector<size_t>> buckets_by_size(const std::vector<int64_t>& numels, size_t bucket_bytes,
                                                 size_t itemsize = 4);

}  // namespace braid::parallel::zero
