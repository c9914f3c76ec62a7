// The batch loader: background threads fill [batch, ...] buffers ahead of the
// training loop.
//
// - Deterministic: a batch's contents depend only on the sampler's order for
//   the epoch and on (seed, epoch, position) for augmentation, never on the
//   number of threads or on timing.
// - Reusable buffers: batches are views of a small pool of buffers. A buffer
//   is refilled only once nothing outside the loader holds a view of it, so
//   keeping a batch (or a tensor autograd saved from it) is always safe; in the
//   usual loop a buffer is reused every (workers * prefetch + 1) batches and no
//   memory is allocated after the first few.
// - Few wake-ups: workers fill until workers * prefetch batches are ready and
//   sleep; next() wakes them only once half of that has been taken, so they
//   refill in runs. On the development VM a woken loader mostly ran on the
//   training thread's core at once: next() cost the MLP's training thread
//   52-105 us per step waking a worker every batch, 13-30 us this way.
// - Bounded waits: next() throws TimeoutError when a batch is not ready within
//   options.timeout; a worker's exception is rethrown by next().
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/data/dataset.h"
#include "braid/data/sampler.h"
#include "braid/data/transforms.h"

namespace braid::data {

struct LoaderOptions {
  int64_t batch_size = 64;
  bool drop_last = false;   // drop a last, smaller batch
  int workers = 1;          // background threads; 0 fills each batch inside next()
  int prefetch = 0;         // batches each worker may fill ahead of the consumer;
                            // 0: as many as fit in 4 MiB, from 2 to 16
  uint64_t seed = 0;        // augmentation seed (sampler seeds are the sampler's)
  Duration timeout = std::chrono::seconds(120);  // longest next() waits for one batch
};

struct Batch {
  Tensor input;       // [b, input_shape...]
  Tensor target;      // [b, target_shape...]
  int64_t index = 0;  // batch number within the epoch
  int64_t size() const { return input.size(0); }
};

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
         const LoaderOptions& options, Transforms transforms = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t batches_per_epoch() const;
  // Examples this loader's sampler visits per epoch.
  int64_t examples_per_epoch() const { return sampler_->size(); }
  const Dataset& dataset() const { return *dataset_; }
  int64_t batch_size() const { return options_.batch_size; }
  // Batches of `batch_size` examples from the next start_epoch() on (a
  // batch-size schedule grows them between epochs; the sampler's order, and
  // so which examples an epoch visits, does not depend on it).
  void set_batch_size(int64_t batch_size);

  // Starts (prefetching) epoch `epoch`, abandoning what is left of the current one.
  void start_epoch(int64_t epoch);
  // The next batch of the current epoch (epoch 0 if none was started), or
  // nullopt once the epoch is exhausted.
  std::optional<Batch> next();

 private:
  struct Buffer {
    Tensor input, target;  // full batch-size storage; batches are views
    bool filling = false;
  };
  void stop_workers();
  // ahead_ and refill_ for the batch size (prefetch 0: what fits in 4 MiB).
  void size_prefetch();
  void worker_loop();
  Batch fill(int64_t batch_index);
  size_t acquire_buffer();

  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Sampler> sampler_;
  LoaderOptions options_;
  bool auto_prefetch_ = false;
  int64_t ahead_ = 0;   // batches the workers may fill ahead of the consumer
  int64_t refill_ = 1;  // free slots before next() wakes the workers
  Transforms transforms_;
  ExampleSpec spec_;

  // Current epoch; written only while no worker runs.
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
  int64_t num_batches_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t claimed_ = 0;   // next batch a worker will fill
  int64_t consumed_ = 0;  // next batch next() returns
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  std::vector<Buffer> pool_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace braid::data
