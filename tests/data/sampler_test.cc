#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "braid/base/error.h"
#include "braid/data/sampler.h"

namespace braid::data {
namespace {

TEST(Sampler, SequentialAndShuffled) {
  SequentialSampler seq(5);
  EXPECT_EQ(seq.indices(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  ShuffledSampler s(1000, 42);
  auto e0 = s.indices(0), e1 = s.indices(1);
  EXPECT_EQ(e0, ShuffledSampler(1000, 42).indices(0));  // same seed, same order
  EXPECT_NE(e0, e1);                                     // reshuffled each epoch
  EXPECT_NE(e0, ShuffledSampler(1000, 43).indices(0));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, SequentialSampler(1000).indices(0));  // a permutation
}

TEST(Sampler, SequentialSharesCoverEveryIndexOnceInOrder) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t n : {0, 1, 5, 20, 23, 10000}) {
      std::vector<int64_t> all;
      for (int r = 0; r < world; ++r) {
        const SequentialSampler share(n, r, world);
        const auto p = share.indices(r);  // the epoch does not matter
        EXPECT_EQ(static_cast<int64_t>(p.size()), share.size());
        EXPECT_LE(share.size(), (n + world - 1) / world);
        EXPECT_GE(share.size(), n / world);
        all.insert(all.end(), p.begin(), p.end());
      }
      EXPECT_EQ(all, SequentialSampler(n).indices(0)) << "n " << n << ", world " << world;
    }
  }
  EXPECT_THROW(SequentialSampler(5, 2, 2), ValueError);
  EXPECT_THROW(SequentialSampler(5, 0, 0), ValueError);
}

TEST(Sampler, ShuffleIsRoughlyUniform) {
  // Where index 0 lands over many epochs: each of 10 positions about 1/10 of the time.
  ShuffledSampler s(10, 7);
  std::vector<int> hits(10);
  for (int e = 0; e < 5000; ++e) {
    auto p = s.indices(e);
    ++hits[std::find(p.begin(), p.end(), 0) - p.begin()];
  }
  for (int h : hits) EXPECT_NEAR(h, 500, 100);
}

TEST(DistributedSampler, DisjointShardsCoverTheEpoch) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t n : {0, 1, 5, 20, 23}) {
      for (Tail tail : {Tail::Wrap, Tail::Drop}) {
        std::vector<int64_t> all;
        for (int rank = 0; rank < world; ++rank) {
          DistributedSampler s(n, {.rank = rank, .world = world, .seed = 9, .tail = tail});
          auto idx = s.indices(2);
          EXPECT_EQ(static_cast<int64_t>(idx.size()), s.size());
          EXPECT_EQ(s.size(), tail == Tail::Wrap ? (n + world - 1) / world : n / world);
          all.insert(all.end(), idx.begin(), idx.end());
        }
        std::set<int64_t> distinct(all.begin(), all.end());
        if (tail == Tail::Drop) {
          EXPECT_EQ(distinct.size(), all.size()) << "shards overlap, world " << world << " n " << n;
          EXPECT_EQ(static_cast<int64_t>(all.size()), n - n % world);
        } else {
          EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << "world " << world << " n " << n;
        }
      }
    }
  }
}

TEST(DistributedSampler, SameSeedSameEpochOrderAcrossRanks) {
  // Rank shards interleave the single shuffled order of ShuffledSampler-style permutation.
  auto perm = permutation(12, 5, 3);
  DistributedSampler r1(12, {.rank = 1, .world = 3, .seed = 5});
  EXPECT_EQ(r1.indices(3), (std::vector<int64_t>{perm[1], perm[4], perm[7], perm[10]}));
  EXPECT_NE(r1.indices(3), r1.indices(4));
}

TEST(DistributedSampler, WithReplacement) {
  DistributedSampler a(50, {.rank = 0, .world = 2, .seed = 1, .replacement = true});
  DistributedSampler b(50, {.rank = 1, .world = 2, .seed = 1, .replacement = true});
  auto ia = a.indices(0), ib = b.indices(0);
  EXPECT_EQ(ia.size(), 25u);
  EXPECT_NE(ia, ib);
  EXPECT_EQ(ia, a.indices(0));
  for (int64_t i : ia) EXPECT_TRUE(i >= 0 && i < 50);
  std::set<int64_t> distinct(ia.begin(), ia.end());
  EXPECT_LT(distinct.size(), ia.size());  // 25 draws of 50 repeat with probability > 0.9999
}

TEST(DistributedSampler, BadRank) {
  EXPECT_THROW(DistributedSampler(10, {.rank = 2, .world = 2}), ValueError);
}

}  // namespace
}  // namespace braid::data
