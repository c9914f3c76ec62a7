#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <thread>

#include "braid/train/config_data.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/error_message.h"

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

// train.batch_size = 2^63-1 made 0 batches an epoch (a run of 0 steps, loss
// nan, exit 0) and 10^8 ran out of memory without naming the key: a batch
// larger than a rank's examples is refused by name, counting its share.
TEST(ConfigData, ABatchLargerThanTheDataIsRefusedByName) {
  std::string path = write_csv(100);
  Config c(braid_schema());
  c.set("data.name=csv");
  c.set_text("data.path", path, "test");
  auto ds = data::open_dataset(dataset_options(c, true));  // 90 training rows
  for (const char* batch : {"train.batch_size=9223372036854775807", "train.batch_size=100000000", "train.batch_size=91"}) {
    c.set(batch);
    const std::string msg = test::message_of<ConfigError>([&] { make_train_loader(c, ds); });
    EXPECT_NE(msg.find("is larger than the 90 training examples this rank reads per epoch; use at most 90"),
              std::string::npos) << msg;
    EXPECT_EQ(msg.find("train.batch_size = "), 0u) << msg;
  }
  c.set("train.batch_size=46");
  const std::string msg = test::message_of<ConfigError>([&] { make_train_loader(c, ds, {.rank = 1, .world = 2}); });
  EXPECT_NE(msg.find("train.batch_size = 46 is larger than the 45 training examples this rank reads per epoch (its "
                     "share over 2 data-parallel ranks)"), std::string::npos) << msg;
  c.set("train.batch_size=90");
  EXPECT_EQ(make_train_loader(c, ds)->batches_per_epoch(), 1);
  // Evaluation takes at most the whole set at once.
  c.set("train.batch_size=9223372036854775807");
  EXPECT_EQ(make_eval_loader(c, data::open_dataset(dataset_options(c, false)))->batches_per_epoch(), 1);
  std::filesystem::remove(path);
}

// train.threads = 100000 died inside OpenMP (SIGSEGV, exit 139, no message).
TEST(ConfigData, ThreadCountsPastTheMachineAreRefusedByName) {
  for (const char* key : {"train.threads", "data.workers"}) {
    Config c(braid_schema());
    const std::string range = test::message_of<ConfigError>([&] { c.set_text(key, "100000", "test"); });
    EXPECT_NE(range.find(std::string(key) + " = 100000 is outside [0, 4096]"), std::string::npos) << range;
    c.set_text(key, "4000", "test");
    const std::string msg = test::message_of<ConfigError>([&] { make_training_run(c); });
    if (std::thread::hardware_concurrency() * 8 < 4000) {
      EXPECT_NE(msg.find(std::string(key) + " = 4000 is more threads than this machine can run usefully"),
                std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace braid::train
