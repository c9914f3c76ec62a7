#include <gtest/gtest.h>

#include "braid/base/error.h"
#include "braid/ps/keyspace.h"
#include "braid/ps/shard.h"
#include "tests/testing/temp_dir.h"

namespace braid::ps {
namespace {

TEST(DenseLayout, RangesTileTheModelAndDifferByAtMostOne) {
  for (int servers = 1; servers <= 7; ++servers) {
    const DenseLayout l(1000003, servers);
    int64_t next = 0, lo = INT64_MAX, hi = 0;
    for (int s = 0; s < servers; ++s) {
      EXPECT_EQ(l.begin(s), next);
      next = l.end(s);
      lo = std::min(lo, l.size(s));
      hi = std::max(hi, l.size(s));
    }
    EXPECT_EQ(next, l.total());
    EXPECT_LE(hi - lo, 1);
  }
}

TEST(KeySharding, ConsecutiveKeysSpreadEvenly) {
  const int servers = 4;
  std::vector<int> count(servers);
  for (uint64_t k = 0; k < 40000; ++k) ++count[static_cast<size_t>(server_of_key(k, servers))];
  for (int c : count) EXPECT_NEAR(c, 10000, 400);
}

TEST(Shard, RowsStartTheSameOnAnyServerAndCheckpointsRoundTrip) {
  test::TempDir dir;
  const PsConfig config{.updater = {.name = "adagrad"}, .seed = 5};
  Shard a(config, 6), b(config, 6);
  a.define_table(1, 3, 0.1);
  b.define_table(1, 3, 0.1);
  std::vector<uint64_t> keys{10, 99};
  std::vector<float> ra(6), rb(6);
  a.read_rows(1, keys, ra);
  std::vector<uint64_t> one{99};
  b.read_rows(1, one, std::span(rb).subspan(0, 3));
  EXPECT_EQ(std::vector<float>(ra.begin() + 3, ra.end()), std::vector<float>(rb.begin(), rb.begin() + 3));
  EXPECT_NE(ra[0], 0.0f);

  std::vector<float> g(6, 0.5f);
  a.apply_dense(g, 0.1);
  a.apply_rows(1, keys, g, 0.1);
  a.save(dir.file("s.safetensors"), 3);
  Shard c(config, 6);
  int64_t clock = 0;
  ASSERT_TRUE(c.load(dir.file("s.safetensors"), &clock));
  EXPECT_EQ(clock, 3);
  EXPECT_EQ(c.version(), 1);
  EXPECT_EQ(std::vector<float>(c.weights().begin(), c.weights().end()),
            std::vector<float>(a.weights().begin(), a.weights().end()));
  // The AdaGrad state came back too: one more identical step stays identical.
  a.apply_rows(1, keys, g, 0.1);
  c.apply_rows(1, keys, g, 0.1);
  std::vector<float> x(6), y(6);
  a.read_rows(1, keys, x);
  c.read_rows(1, keys, y);
  EXPECT_EQ(x, y);

  Shard other(config, 7);
  EXPECT_THROW(other.load(dir.file("s.safetensors"), &clock), ConfigError);
  EXPECT_FALSE(other.load(dir.file("missing.safetensors"), &clock));
}

}  // namespace
}  // namespace braid::ps
