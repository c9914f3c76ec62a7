#include "braid/data/sampler.h"

#include <numeric>

#include "braid/base/error.h"
#include "braid/base/rng.h"

namespace braid::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  Generator g(seed, stream);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(p[i], p[g.below(static_cast<uint64_t>(i) + 1)]);
  }
  return p;
}

SequentialSampler::SequentialSampler(int64_t n, int rank, int world) {
  if (n < 0) fail<ValueError>("SequentialSampler: negative size {}", n);
  if (world < 1 || rank < 0 || rank >= world) {
    fail<ValueError>("SequentialSampler: rank {} is not in [0, world = {})", rank, world);
  }
  begin_ = n * rank / world;
  end_ = n * (rank + 1) / world;
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> p(static_cast<size_t>(end_ - begin_));
  std::iota(p.begin(), p.end(), begin_);
  return p;
}

ShuffledSampler::ShuffledSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  if (n < 0) fail<ValueError>("ShuffledSampler: negative size {}", n);
}

std::vector<int64_t> ShuffledSampler::indices(int64_t epoch) const {
  return permutation(n_, seed_, static_cast<uint64_t>(epoch));
}

DistributedSampler::DistributedSampler(int64_t n, const DistributedSamplerOptions& o) : n_(n), o_(o) {
  if (n < 0) fail<ValueError>("DistributedSampler: negative size {}", n);
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    fail<ValueError>("DistributedSampler: rank {} is not in [0, world = {})", o.rank, o.world);
  }
  per_rank_ = o.tail == Tail::Wrap ? (n + o.world - 1) / o.world : n / o.world;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(per_rank_));
  if (o_.replacement) {
    // Stream: epoch in the high bits, rank in the low bits, so ranks never share draws.
    Generator g(o_.seed, (static_cast<uint64_t>(epoch) << 24) | static_cast<uint64_t>(o_.rank));
    for (int64_t i = 0; i < per_rank_; ++i) out.push_back(static_cast<int64_t>(g.below(static_cast<uint64_t>(n_))));
    return out;
  }
  std::vector<int64_t> order;
  if (o_.shuffle) {
    order = permutation(n_, o_.seed, static_cast<uint64_t>(epoch));
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  for (int64_t i = 0; i < per_rank_; ++i) {
    int64_t pos = o_.rank + i * o_.world;
    out.push_back(order[static_cast<size_t>(pos % n_)]);  // pos >= n only with Tail::Wrap
  }
  return out;
}

}  // namespace braid::data
