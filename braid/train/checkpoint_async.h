// Writing a rank's shard of a sharded checkpoint (checkpoint_manifest.h)
// while training goes on.
//
// The step loop pays only for copying the rank's pieces into a staging
// buffer (one host buffer, reused from save to save). A writer thread then
// writes it as the rank's safetensors file (temp + fsync + rename), commits
// the rank's index the same way, and on world rank 0 waits, up to a
// deadline, for every rank's index of the same save before writing the
// manifest and pruning old checkpoints. One save is in flight at a time: a
// save requested while the previous one is still being written waits for it
// (that wait is part of the stall it reports).
//
// The ranks meet through the checkpoint folder, which they share (as they do
// for whole checkpoints of sharded models), not through the communicator: a
// collective on the writer thread would race the step's own collectives.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/nn/module.h"
#include "braid/optim/optimizer.h"
#include "braid/parallel/plan.h"
#include "braid/tensor/tensor.h"
#include "braid/train/checkpoint_manifest.h"

namespace braid::train {

// One piece to write: `data`'s elements (any device, any layout) are the run
// of `name`'s slice starting at element `begin`.
struct StagedTensor {
  std::string name{};
  Tensor data{};
  Shape slice_shape{};
  parallel::ShardSpec spec{};
  int64_t begin = 0;
};

// What this rank holds of the model and the optimizer under `plan`, as the
// pieces of its shard: under ZeRO its runs of every parameter and of their
// optimizer buffers; otherwise its data replica's share (1/N) of every
// tensor, tensor-parallel slices as this rank holds them; on data rank 0 a
// codec's memory. Collective over the data axis (Plan::rank_state).
// ValueError when an optimizer buffer does not fit its parameter's slice.
std::vector<StagedTensor> rank_pieces(parallel::Plan& plan, const nn::Module& model, const optim::Optimizer& optimizer);

struct ShardSave {
  std::vector<StagedTensor> tensors{};
  RankIndex index{};   // rank, session, step, shard, orders, rng; the writer adds the pieces
  Manifest manifest{}; // world rank 0: every field but ranks, which the writer gathers from the indices
};

struct ShardWriterOptions {
  std::string dir{};
  int world = 1;       // ranks whose indices world rank 0 waits for
  bool async = true;   // false: save() returns once written (and, on rank 0, the manifest committed)
  int keep = 3;        // complete checkpoints kept (rank 0 prunes)
  Duration timeout = std::chrono::seconds(300);  // rank 0's wait for the other ranks' shards
};

// What became of a save, reported once it is finished.
struct SaveOutcome {
  int64_t step = 0;
  std::string stem{};    // the checkpoint folder
  std::string error{};   // "" when written (and, on world rank 0, committed by its manifest)
  double stall_s = 0;    // the step loop's wait for the previous save plus the staging copy
  double write_s = 0;    // the writer's time, until committed
  int64_t bytes = 0;     // of this rank's pieces
};

class ShardWriter {
 public:
  explicit ShardWriter(ShardWriterOptions options);
  // Finishes the save in flight.
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Waits for the save in flight, copies `save.tensors` into the staging
  // buffer and writes them in the background (or now, when not async).
  // Returns the seconds the caller stalled. Errors of the write itself are
  // reported through finished(), never thrown here: the previous complete
  // checkpoint stays, and training may go on.
  double save(ShardSave save);
  // The saves finished since the last call, oldest first; `wait`: after the
  // one in flight has finished too.
  std::vector<SaveOutcome> finished(bool wait);

 private:
  struct Job {
    ShardSave save;
    std::vector<std::pair<size_t, size_t>> at;  // each tensor's bytes in the staging buffer: offset, length
    SaveOutcome outcome;
  };
  void run();
  void write(Job& job);
  void wait_idle(std::unique_lock<std::mutex>& lock);

  ShardWriterOptions o_;
  std::vector<std::byte> staging_;  // reused: grows to the largest shard, never shrinks
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;          // the save in flight
  std::vector<SaveOutcome> done_;
  bool stop_ = false;
  std::thread thread_;
};

// Every rank's index of the save `session` of `step` in `dir`, read as they
// are committed, until `deadline`: TimeoutError naming the step, the wait and
// the ranks whose shards are missing. IoError when an index is malformed.
std::vector<RankIndex> await_rank_indices(const std::string& dir, int64_t step, int world, const std::string& session,
                                          Duration timeout);

}  // namespace braid::train
