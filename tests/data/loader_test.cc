#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "braid/data/loader.h"

namespace braid::data {
namespace {

// Example i: input [1, 2, 3] f32 filled with i, target i64 i.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  ExampleSpec spec() const override { return {{1, 2, 3}, DType::f32, {}, DType::i64}; }
  void read(int64_t index, std::byte* input, std::byte* target) const override {
    auto* x = reinterpret_cast<float*>(input);
    for (int k = 0; k < 6; ++k) x[k] = static_cast<float>(index) + 0.1f * static_cast<float>(k);
    std::memcpy(target, &index, sizeof index);
    if (index == fail_at) fail<IoError>("synthetic read failure at {}", index);
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
  }
  int64_t fail_at = -1;
  std::chrono::milliseconds delay{0};

 private:
  int64_t n_;
};

std::vector<std::vector<float>> epoch_inputs(Loader& loader, int64_t epoch) {
  std::vector<std::vector<float>> out;
  loader.start_epoch(epoch);
  while (auto b = loader.next()) out.push_back(b->input.to_vector<float>());
  return out;
}

TEST(Loader, BatchesFollowTheSampler) {
  auto ds = std::make_shared<CountingDataset>(10);
  Loader loader(ds, std::make_shared<SequentialSampler>(10), {.batch_size = 4, .workers = 2});
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  std::vector<int64_t> targets, sizes;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->input.shape()[0], b->size());
    EXPECT_EQ(b->input.shape(), (Shape{b->size(), 1, 2, 3}));
    sizes.push_back(b->size());
    for (int64_t t : b->target.to_vector<int64_t>()) targets.push_back(t);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(targets, SequentialSampler(10).indices(0));
  EXPECT_FALSE(loader.next().has_value());  // stays exhausted

  Loader drop(ds, std::make_shared<SequentialSampler>(10), {.batch_size = 4, .drop_last = true, .workers = 1});
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  EXPECT_EQ(epoch_inputs(drop, 0).size(), 2u);
}

TEST(Loader, SameSeedSameBatchesWhateverTheThreadCount) {
  auto ds = std::make_shared<CountingDataset>(101);
  auto sampler = std::make_shared<ShuffledSampler>(101, 3);
  Transforms aug = {std::make_shared<RandomCrop>(1), std::make_shared<HorizontalFlip>()};
  std::vector<std::vector<std::vector<float>>> runs;
  for (int workers : {0, 1, 4}) {
    Loader loader(ds, sampler, {.batch_size = 8, .workers = workers, .prefetch = 3, .seed = 11}, aug);
    runs.push_back(epoch_inputs(loader, 5));
    EXPECT_NE(runs.back(), epoch_inputs(loader, 6));  // a new epoch reshuffles
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
  Loader other_seed(ds, sampler, {.batch_size = 8, .workers = 1, .seed = 12}, aug);
  EXPECT_NE(epoch_inputs(other_seed, 5), runs[0]);  // augmentation follows the seed
}

// Workers sleep once their room is full and next() wakes them only when half
// of it is free again: whatever the pace on either side, every batch arrives,
// in order, and no next() waits for a sleeping worker (it would time out).
TEST(Loader, RefillsInRunsWithoutEverStarvingTheConsumer) {
  auto ds = std::make_shared<CountingDataset>(203);
  for (int workers : {1, 2, 3}) {
    for (int prefetch : {0, 1, 2, 5}) {
      Loader loader(ds, std::make_shared<SequentialSampler>(203),
                    {.batch_size = 2, .workers = workers, .prefetch = prefetch, .timeout = std::chrono::seconds(5)});
      for (int epoch = 0; epoch < 2; ++epoch) {
        loader.start_epoch(epoch);
        int64_t expect = 0;
        while (auto b = loader.next()) {
          ASSERT_EQ(b->index, expect) << workers << " workers, prefetch " << prefetch;
          ASSERT_EQ(b->target.to_vector<int64_t>()[0], 2 * expect);
          if (expect % 7 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow step now and then
          ++expect;
        }
        EXPECT_EQ(expect, 102);
      }
    }
  }
}

TEST(Loader, ReusesBuffersButNeverOverwritesAHeldBatch) {
  auto ds = std::make_shared<CountingDataset>(64);
  Loader loader(ds, std::make_shared<SequentialSampler>(64), {.batch_size = 4, .workers = 1, .prefetch = 1});
  std::set<const void*> storages;
  Batch held;
  int64_t n = 0;
  while (auto b = loader.next()) {
    storages.insert(b->input.storage().get());
    if (b->index == 2) held = *b;  // keep one batch for the whole epoch
    ++n;
  }
  EXPECT_EQ(n, 16);
  // 1 worker x 1 prefetched + the one being consumed + the held one, with slack for timing.
  EXPECT_LE(storages.size(), 5u);
  EXPECT_EQ(held.target.to_vector<int64_t>(), (std::vector<int64_t>{8, 9, 10, 11}));
}

TEST(Loader, WorkerErrorsReachTheCaller) {
  auto ds = std::make_shared<CountingDataset>(40);
  ds->fail_at = 17;
  Loader loader(ds, std::make_shared<SequentialSampler>(40), {.batch_size = 4, .workers = 2});
  try {
    while (loader.next()) {
    }
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("failure at 17"), std::string::npos);
  }
}

TEST(Loader, SlowDatasetTimesOut) {
  auto ds = std::make_shared<CountingDataset>(8);
  ds->delay = std::chrono::milliseconds(200);
  Loader loader(ds, std::make_shared<SequentialSampler>(8),
                {.batch_size = 2, .workers = 1, .timeout = std::chrono::milliseconds(50)});
  try {
    loader.next();
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("batch 0 of epoch 0"), std::string::npos) << e.what();
  }
}  // the destructor joins the worker once it finishes its batch

TEST(Loader, RejectsBadOptions) {
  auto ds = std::make_shared<CountingDataset>(8);
  auto s = std::make_shared<SequentialSampler>(8);
  EXPECT_THROW(Loader(ds, s, {.batch_size = 0}), ValueError);
  EXPECT_THROW(Loader(ds, s, {.workers = -1}), ValueError);
}

}  // namespace
}  // namespace braid::data
