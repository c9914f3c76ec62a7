#include "braid/data/sparse_batch.h"

#include <algorithm>

#include "braid/base/hash.h"

namespace braid::data {

uint64_t feature_key(uint64_t feature, uint64_t buckets) {
  return buckets == 0 ? feature : mix64(feature) % buckets;
}

SparseBatch make_sparse_batch(const LibsvmDataset& data, std::span<const int64_t> rows, uint64_t buckets) {
  const auto B = static_cast<int64_t>(rows.size());
  const std::vector<float>& classes = data.classes();
  SparseBatch batch;
  batch.offsets = Tensor::empty({B}, DType::i64);
  batch.targets = Tensor::empty({B}, DType::i64);
  int64_t* offsets = batch.offsets.data<int64_t>();
  int64_t* targets = batch.targets.data<int64_t>();
  std::vector<uint64_t> row_keys;  // [nnz], the key of each nonzero
  std::vector<float> values;
  for (int64_t b = 0; b < B; ++b) {
    const LibsvmDataset::Row row = data.row(rows[b]);  // IndexError when out of range
    offsets[b] = static_cast<int64_t>(row_keys.size());
    targets[b] = std::lower_bound(classes.begin(), classes.end(), row.label) - classes.begin();
    for (int32_t j : row.indices) row_keys.push_back(feature_key(static_cast<uint64_t>(j), buckets));
    values.insert(values.end(), row.values.begin(), row.values.end());
  }
  batch.keys = row_keys;
  std::sort(batch.keys.begin(), batch.keys.end());
  batch.keys.erase(std::unique(batch.keys.begin(), batch.keys.end()), batch.keys.end());
  const auto nnz = static_cast<int64_t>(row_keys.size());
  batch.index = Tensor::empty({nnz}, DType::i64);
  int64_t* index = batch.index.data<int64_t>();
  for (int64_t k = 0; k < nnz; ++k) {
    index[k] = std::lower_bound(batch.keys.begin(), batch.keys.end(), row_keys[k]) - batch.keys.begin();
  }
  batch.values = Tensor::from_vector<float>(values, {nnz});
  return batch;
}

}  // namespace braid::data
