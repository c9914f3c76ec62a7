// Sparse minibatches from libsvm rows, for embedding-bag models (sparse
// linear / wide models whose weight table is pulled per batch, e.g. from a
// parameter server): only the batch's distinct feature keys are touched.
//
// A batch of B rows with nnz nonzeros in all is CSR over local key ids:
//   keys    the distinct feature keys of the batch, ascending (a local id is a
//           position in keys, so a [keys.size(), D] slice of the table holds
//           every row the batch needs)
//   index   i64 [nnz]  local id of each nonzero's key, rows back to back
//   offsets i64 [B]    where each row starts in index (offsets[0] == 0)
//   values  f32 [nnz]  the feature values
//   targets i64 [B]    class ids: position of the row's label in classes()
// so embedding_bag(table_rows, index, offsets, values) = X_dense @ table, with
// X_dense the rows densified over the keys (see docs/data.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "braid/data/libsvm.h"
#include "braid/tensor/tensor.h"

namespace braid::data {

struct SparseBatch {
  std::vector<uint64_t> keys;
  Tensor index;
  Tensor offsets;
  Tensor values;
  Tensor targets;
};

// The key of 0-based feature index j: j itself when buckets == 0, else
// mix64(j) % buckets (braid/base/hash.h; feature hashing: features that
// collide share a key, and two nonzeros of one row may then share a key; bags
// add them, which is what hashing a dense row would do).
uint64_t feature_key(uint64_t feature, uint64_t buckets);

// Rows of `data` (any order, repeats allowed) as one batch. IndexError for a
// row outside [0, data.size()). Cost: O(nnz log nnz).
SparseBatch make_sparse_batch(const LibsvmDataset& data, std::span<const int64_t> rows, uint64_t buckets);

}  // namespace braid::data
