// Sparse training through parameter servers (model.name = sparse_linear): a
// linear classifier over hashed sparse features (libsvm input),
//
//   logits = embedding_bag(E, features, values) W^T + b
//
// where E is a [buckets, model.hidden] embedding table kept on the servers as
// sparse table 0 (rows created on first touch) and W, b are dense server
// values. Each step a worker pulls only the rows of E its batch touches,
// computes the gradients locally and pushes them back: the table never has to
// fit on a worker. Consistency, updater and cadence come from ps.* as for the
// dense `ps` strategy; data.hash_buckets folds feature ids into that many
// keys (0: one row per feature id).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "braid/train/config.h"

namespace braid::train {

struct SparseSummary {
  int64_t steps = 0;
  double train_seconds = 0;
  double samples_per_s = 0;  // this worker
  int64_t rows_pulled = 0;   // table rows this worker pulled, in all
  bool has_eval = false;     // worker 0 evaluates on the held-out 10%
  double test_loss = 0, test_top1 = 0;
  int workers = 1;
  bool leader = false;
};

// Runs one worker of the job (braid launch --servers S --workers W -- braid
// train CONFIG). `report` receives progress lines (the leader's only).
SparseSummary train_sparse(const Config& config, const std::function<void(const std::string&)>& report);

}  // namespace braid::train
