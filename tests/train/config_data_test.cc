#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "braid/train/config_data.h"

namespace braid::train {
namespace {

// A 10-class CSV with 3 features: row i has features (i, i, i), label i % 10.
std::string write_csv(int rows) {
  std::string path = (std::filesystem::temp_directory_path() / "braid_config_data_test.csv").string();
  std::ofstream out(path);
  for (int i = 0; i < rows; ++i) out << i << "," << i << "," << i << "," << i % 10 << "\n";
  return path;
}

TEST(ConfigData, SamplingWithReplacementIsUniformOverTheWholeSet) {
  Config c(braid_schema());
  c.set("data.sampling=replacement");
  const int64_t n = 90, epochs = 200;
  std::vector<int64_t> hits(n, 0);
  bool repeats = false;
  for (int rank = 0; rank < 2; ++rank) {
    auto sampler = make_train_sampler(c, n, {.rank = rank, .world = 2});
    ASSERT_EQ(sampler->size(), 45);
    for (int64_t e = 0; e < epochs; ++e) {
      const std::vector<int64_t> idx = sampler->indices(e);
      repeats = repeats || std::set<int64_t>(idx.begin(), idx.end()).size() < idx.size();
      for (int64_t i : idx) ++hits.at(static_cast<size_t>(i));
    }
  }
  EXPECT_TRUE(repeats);  // with replacement, not a permutation
  // Pearson's chi-square against uniform, n - 1 = 89 degrees of freedom:
  // mean 89, sd 13.3; 160 is beyond p = 1e-5.
  const double expected = 2.0 * 45 * epochs / n;
  double chi2 = 0;
  for (int64_t h : hits) chi2 += (h - expected) * (h - expected) / expected;
  EXPECT_LT(chi2, 160.0);
  EXPECT_GT(chi2, 40.0);  // not suspiciously even either (p < 1e-5 below)

  // One process draws with replacement too; sequential visits 0, 1, 2, ...
  EXPECT_EQ(make_train_sampler(c, n)->size(), n);
  // One process visits ShuffledSampler's and SequentialSampler's orders.
  c.set("data.sampling=shuffle");
  EXPECT_EQ(make_train_sampler(c, n)->indices(3), data::ShuffledSampler(n, 0).indices(3));
  c.set("data.sampling=sequential");
  EXPECT_EQ(make_train_sampler(c, n)->indices(3), data::SequentialSampler(n).indices(3));
  const std::vector<int64_t> in_order = make_train_sampler(c, n)->indices(5);
  EXPECT_EQ(in_order[0], 0);
  EXPECT_EQ(in_order[89], 89);
  EXPECT_THROW(c.set("data.sampling=bootstrap"), ConfigError);
}

TEST(ConfigData, TrainLoaderFollowsTheConfig) {
  std::string path = write_csv(100);
  Config c(braid_schema());
  c.set("data.name=csv");
  c.set_text("data.path", path, "test");
  c.set("train.batch_size=16");
  c.set("data.workers=2");
  auto ds = data::open_dataset(dataset_options(c, true));
  ASSERT_EQ(ds->size(), 90);
  auto loader = make_train_loader(c, ds);
  EXPECT_EQ(loader->batches_per_epoch(), 6);  // 90 / 16, last batch of 10
  std::multiset<float> seen;
  std::vector<float> first_order;
  loader->start_epoch(0);
  while (auto b = loader->next()) {
    auto x = b->input.to_vector<float>();
    for (size_t i = 0; i < x.size(); i += 3) seen.insert(x[i]);
    if (first_order.empty()) first_order = x;
  }
  EXPECT_EQ(seen.size(), 90u);
  EXPECT_EQ(*seen.rbegin(), 89.0f);
  EXPECT_NE(first_order[0] + first_order[3] + first_order[6], 0 + 3.0f);  // shuffled, not 0, 1, 2...

  // Two data-parallel ranks: disjoint shards of ceil(90 / 2) each.
  std::set<float> shard0, shard1;
  for (int rank = 0; rank < 2; ++rank) {
    auto l = make_train_loader(c, ds, {.rank = rank, .world = 2});
    l->start_epoch(3);
    while (auto b = l->next()) {
      auto x = b->input.to_vector<float>();
      for (size_t i = 0; i < x.size(); i += 3) (rank == 0 ? shard0 : shard1).insert(x[i]);
    }
  }
  EXPECT_EQ(shard0.size() + shard1.size(), 90u);
  for (float v : shard0) EXPECT_EQ(shard1.count(v), 0u);

  auto eval = make_eval_loader(c, data::open_dataset(dataset_options(c, false)));
  auto b = eval->next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // rows 90..99
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace braid::train
