// Samplers: the order in which a process visits dataset indices each epoch.
//
// Each sampler's order is a pure function of (seed, epoch, rank), so a resumed
// run, or any number of loader threads, sees exactly the same order.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Dataset indices to visit in `epoch`, in order; size() of them.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  // Indices per epoch (the same every epoch).
  virtual int64_t size() const = 0;
};

// 0, 1, ..., n-1 every epoch (evaluation); with (rank, world), the rank's
// contiguous share of them, [n*rank/world, n*(rank+1)/world): the shares
// cover every index exactly once (evaluation split over replicas that hold
// the same model, whose counts are then summed).
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t n, int rank = 0, int world = 1);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return end_ - begin_; }

 private:
  int64_t begin_, end_;
};

// A fresh uniform permutation of [0, n) each epoch, drawn from Philox(seed, epoch).
class ShuffledSampler final : public Sampler {
 public:
  ShuffledSampler(int64_t n, uint64_t seed);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// What a distributed sampler does when n is not a multiple of world.
enum class Tail {
  Wrap,  // pad the epoch's order by repeating its first indices: every rank gets ceil(n / world)
  Drop,  // drop the last n % world indices of the order: every rank gets floor(n / world)
};

struct DistributedSamplerOptions {
  int rank = 0;
  int world = 1;
  uint64_t seed = 0;          // must be the same on every rank
  bool shuffle = true;        // false: shard 0..n-1 in order
  bool replacement = false;   // true: each rank draws its indices uniformly with replacement
  Tail tail = Tail::Wrap;
};

// One rank's share of an epoch. Without replacement every rank computes the
// same per-epoch permutation (shared seed) and takes positions rank, rank +
// world, rank + 2*world, ...: the shards are disjoint and, with Tail::Drop,
// cover all but n % world indices; with Tail::Wrap, they cover every index
// and the first (world - n % world) % world positions are visited twice.
// With replacement each rank draws independently from Philox(seed, epoch,
// rank): sampling with replacement from the whole dataset (bootstrap / the
// "data partition by random sampling" scheme), same per-rank counts as above.
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t n, const DistributedSamplerOptions& options);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return per_rank_; }

 private:
  int64_t n_;
  DistributedSamplerOptions o_;
  int64_t per_rank_;
};

// A uniform permutation of [0, n) determined by (seed, stream).
std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace braid::data
