// Bucketed all-reduce: the gradient synchronisation of `parallel.strategy =
// allreduce`, synchronous data parallelism in the style of PyTorch DDP.
//
// Gradients live in a few flat buckets (parameters in reverse registration
// order, which is close to the order backward finishes them). When the last
// gradient of a bucket is final, the bucket's all-reduce (average) starts on
// the communicator's thread while backward goes on; before_step() waits for
// the rest. After the first step every parameter's .grad is a view into its
// bucket, so backward accumulates straight into the buffer that travels: no
// copies on the way out or back. Buckets are launched strictly in index order
// on every rank, so collectives match even when ranks finish gradients in a
// different order.
//
// Each bucket travels through a BucketHook (default: all-reduce average on
// the data axis), the point where codecs and other reductions plug in
// (parallel/codec_hook.h).
#pragma once

#include <functional>
#include <memory>

#include "braid/comm/communicator.h"
#include "braid/parallel/grad_sync.h"

namespace braid::parallel {

struct DataParallelOptions {
  size_t bucket_bytes = size_t{1} << 20;  // per bucket; DDP's default is 25 MiB
  bool overlap = true;  // false: all-reduce every bucket after backward (for comparison)
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  Duration timeout = std::chrono::seconds(300);
};

// One bucket as a hook sees it (c10d's GradBucket): its index (buckets start
// in index order on every rank), the flat gradients of one dtype and the
// shapes of the parameters laid out in it, in order.
struct GradBucket {
  size_t index = 0;
  Tensor flat;
  std::vector<Shape> shapes;
};

class BucketHook {
 public:
  virtual ~BucketHook() = default;
  // Starts the combination of `bucket`'s gradients, in place, on `comm`;
  // `background`: start at once (backward is still running) rather than in
  // the first thread that waits. The result must be the data axis's average,
  // the same on every rank.
  virtual comm::Work run(comm::Communicator& comm, const GradBucket& bucket, bool background) = 0;
  // Figures since the last call (bytes, seconds); empty when it keeps none.
  virtual nlohmann::json take_stats() { return nlohmann::json::object(); }
  // What it remembers between steps on this rank (checkpoints), and back.
  virtual nn::NamedTensors state_dict() const { return {}; }
  virtual void load_state_dict(const nn::NamedTensors& /*state*/) {}
};

class BucketedAllreduce final : public GradSync {
 public:
  // `comm`: the data axis. `hook`: null for the all-reduce average.
  BucketedAllreduce(comm::Communicator comm, DataParallelOptions options = {}, std::unique_ptr<BucketHook> hook = nullptr);
  ~BucketedAllreduce() override;

  std::string name() const override { return "allreduce"; }
  // Also makes every replica start from data rank 0's parameters and buffers;
  // buffers (BatchNorm running statistics) are kept equal to rank 0's after
  // every step, as DDP does.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void on_grad_ready(size_t index, Tensor& grad) override;
  void set_sync(bool sync) override { sync_ = sync; }
  void finish() override;
  void after_step() override;
  nlohmann::json take_stats() override { return hook_->take_stats(); }
  nn::NamedTensors rank_state() override;
  void load_rank_state(const nn::NamedTensors& state) override;

  size_t bucket_count() const { return buckets_.size(); }
  // Bucket all-reduces started during backward, summed over all steps so far.
  size_t buckets_launched_early() const { return launched_early_; }

 private:
  struct Bucket {
    GradBucket grads;             // flat: [elements], the params' dtype
    std::vector<size_t> params;   // indices into params_
    size_t ready = 0;             // gradients final this step
    bool launched = false;
    comm::Work work;
  };
  void launch_ready_buckets();
  void broadcast_from_rank0(const std::vector<NamedParameter>& tensors);
  void broadcast_buffers();
  void launch(Bucket& b, bool background);

  comm::Communicator comm_;
  DataParallelOptions options_;
  std::unique_ptr<BucketHook> hook_;
  std::vector<NamedParameter> params_, buffers_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;     // param index -> bucket
  std::vector<Tensor> views_;         // param index -> its slice of the bucket
  std::vector<bool> ready_;           // param index -> gradient final this step
  size_t next_launch_ = 0;            // buckets start in index order
  size_t launched_early_ = 0;
  bool sync_ = true;
};

}  // namespace braid::parallel
