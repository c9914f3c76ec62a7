// make_sparse_batch: keys, local ids, offsets, values and class targets read
// off a tiny libsvm file, with and without feature hashing, and the batch's
// bag sums against the densified rows times a table.
//
// braid_data_test does not link braid_ops, so the bag sums here are a plain
// loop; embedding_bag itself is checked against a dense matmul of CSR rows in
// tests/ops/index_test.cc (EmbeddingBagIsSparseTimesDense).
#include "braid/data/sparse_batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "braid/base/rng.h"
#include "tests/data/temp_dir.h"

namespace braid::data {
namespace {

using test::TempDir;

// Labels -1/1: class ids 0/1. Row 2 has no features; row 3 a comment.
constexpr const char* kFile =
    "1 1:0.5 3:2 7:-1\n"
    "-1 3:1.5\n"
    "1\n"
    "-1 2:4 7:0.25  # comment\n";

template <class T>
std::vector<T> values_of(const Tensor& t) {
  return t.to_vector<T>();
}

TEST(SparseBatch, KeysIndexOffsetsValuesTargets) {
  TempDir dir;
  test::write_text(dir.file("a.svm"), kFile);
  const LibsvmDataset data(dir.file("a.svm"));
  const std::vector<int64_t> rows{3, 0, 2, 0};
  const SparseBatch b = make_sparse_batch(data, rows, 0);
  // 0-based features of rows 3, 0: {1, 6}, {0, 2, 6}.
  EXPECT_EQ(b.keys, (std::vector<uint64_t>{0, 1, 2, 6}));
  EXPECT_EQ(values_of<int64_t>(b.index), (std::vector<int64_t>{1, 3, 0, 2, 3, 0, 2, 3}));
  EXPECT_EQ(values_of<int64_t>(b.offsets), (std::vector<int64_t>{0, 2, 5, 5}));
  EXPECT_EQ(values_of<float>(b.values), (std::vector<float>{4, 0.25f, 0.5f, 2, -1, 0.5f, 2, -1}));
  EXPECT_EQ(values_of<int64_t>(b.targets), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(b.index.dtype(), DType::i64);
  EXPECT_EQ(b.values.dtype(), DType::f32);

  // Targets are the same class ids the dense Dataset path gives.
  const LibsvmDataset classed(dir.file("a.svm"), {.class_targets = true});
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(static_cast<int64_t>(classed.get(rows[i]).target.item()), values_of<int64_t>(b.targets)[i]);

  const SparseBatch empty = make_sparse_batch(data, {}, 0);
  EXPECT_TRUE(empty.keys.empty());
  EXPECT_EQ(empty.index.shape(), (Shape{0}));
  EXPECT_EQ(empty.offsets.shape(), (Shape{0}));
  const std::vector<int64_t> bad{0, 4};
  EXPECT_THROW(make_sparse_batch(data, bad, 0), IndexError);
}

TEST(SparseBatch, HashedKeys) {
  // splitmix64's first output for state 0 (the published test vector).
  EXPECT_EQ(feature_key(0, ~uint64_t{0}), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(feature_key(12345, 0), 12345u);
  TempDir dir;
  test::write_text(dir.file("a.svm"), kFile);
  const LibsvmDataset data(dir.file("a.svm"));
  const std::vector<int64_t> rows{3, 0, 2, 0};
  const std::vector<std::vector<uint64_t>> features{{1, 6}, {0, 2, 6}, {}, {0, 2, 6}};
  for (uint64_t buckets : {2, 3, 1000003}) {
    const SparseBatch b = make_sparse_batch(data, rows, buckets);
    std::vector<uint64_t> want;
    for (const auto& f : features) {
      for (uint64_t j : f) want.push_back(feature_key(j, buckets));
    }
    std::vector<uint64_t> got;
    for (int64_t i : values_of<int64_t>(b.index)) got.push_back(b.keys.at(static_cast<size_t>(i)));
    EXPECT_EQ(got, want) << buckets;
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(b.keys, want) << buckets;
    EXPECT_LT(b.keys.back(), buckets);
    EXPECT_EQ(values_of<int64_t>(b.offsets), (std::vector<int64_t>{0, 2, 5, 5}));
  }
  // Consecutive ids spread evenly: 100k features over 10 buckets, each within 3%.
  std::vector<int64_t> count(10);
  for (uint64_t j = 0; j < 100000; ++j) ++count[feature_key(j, 10)];
  for (int64_t c : count) EXPECT_NEAR(c, 10000, 300);
}

// Sum over a row's nonzeros of value * table[keys[index]] == the row densified
// over keys times the table (what embedding_bag with per_sample_weights = values computes).
TEST(SparseBatch, BagSumsEqualDenseRowsTimesTable) {
  TempDir dir;
  test::write_text(dir.file("a.svm"), kFile);
  const LibsvmDataset data(dir.file("a.svm"));
  const std::vector<int64_t> rows{3, 0, 2, 1, 0};
  const int64_t D = 3;
  Generator gen(7);
  for (uint64_t buckets : {0, 3}) {
    const SparseBatch b = make_sparse_batch(data, rows, buckets);
    const auto key_count = static_cast<int64_t>(b.keys.size());
    // The table as the batch would pull it: one row per key.
    std::map<uint64_t, std::vector<double>> table;
    for (uint64_t k : b.keys) {
      for (int64_t d = 0; d < D; ++d) table[k].push_back(gen.uniform_f64() - 0.5);
    }
    const auto index = values_of<int64_t>(b.index), offsets = values_of<int64_t>(b.offsets);
    const auto values = values_of<float>(b.values);
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t end = r + 1 < rows.size() ? offsets[r + 1] : static_cast<int64_t>(index.size());
      std::vector<double> bag(D, 0.0), dense_out(D, 0.0);
      for (int64_t k = offsets[r]; k < end; ++k) {
        ASSERT_LT(index[k], key_count);
        for (int64_t d = 0; d < D; ++d) bag[d] += values[k] * table[b.keys[index[k]]][d];
      }
      const std::vector<float> x = data.get(rows[r]).input.to_vector<float>();  // dense over features
      for (size_t j = 0; j < x.size(); ++j) {
        if (x[j] == 0) continue;
        for (int64_t d = 0; d < D; ++d) dense_out[d] += x[j] * table[feature_key(j, buckets)][d];
      }
      for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(bag[d], dense_out[d], 1e-12) << "row " << r << " buckets " << buckets;
    }
  }
}

}  // namespace
}  // namespace braid::data
