// ZeRO (Rajbhandari et al., 2020): data parallelism that does not keep N
// copies of the model state. A gradient-synchronisation part on the data
// axis, so it composes with tensor and pipeline parallelism on the others.
//
//   stage 1  the optimizer state is split: rank r updates only its pieces of
//            the parameters (layout.h), after a reduce-scatter of the
//            gradient buckets, then the buckets' parameters are all-gathered
//   stage 2  also the gradients: each bucket is reduce-scattered as soon as
//            backward finishes it, and the rank keeps only its piece
//   stage 3  also the parameters: each layer's are gathered just before its
//            forward and again before its backward, and freed after each;
//            the next layer's gather is started while this one computes
//
// Stages 1 and 2 move the parameters into flat bucket buffers (views, same
// handles), so the optimizer's slices are views of the parameters
// themselves and the all-gather writes straight into them. Stage 3 keeps the
// rank's pieces in one flat shard and gathers each layer into a buffer whose
// memory exists only while the layer runs (Storage::release). Checkpoints
// hold whole tensors (GradSync::model_state), so they load into any world
// size, stage or plan.
#pragma once

#include <deque>
#include <functional>
#include <memory>

#include "braid/comm/communicator.h"
#include "braid/nn/sequential.h"
#include "braid/parallel/grad_sync.h"
#include "braid/parallel/zero/layout.h"

namespace braid::parallel::zero {

struct ZeroOptions {
  int stage = 1;                          // 1, 2 or 3
  size_t bucket_bytes = size_t{1} << 20;  // gradient buckets of stages 1 and 2
  bool prefetch = true;                   // stage 3: gather layer i+1 (i-1 in backward) while i runs
  Duration timeout = std::chrono::seconds(300);
};

class ZeroSync final : public GradSync {
 public:
  // `data`: the data axis. `model`: what this rank trains (after tensor and
  // pipeline sharding); stage 3 needs an nn::Sequential (one layer is one
  // gathered unit) and runs its layers from now on. Parameters move into
  // ZeRO's buffers here: build the optimizer over optimizer_parameters().
  // `takes`, when given: the parameters this sync holds (a parameter group
  // with its own layout on its own ranks: expert parallelism's experts over
  // their replicas, the rest over the data axis); setup() then gets those only.
  ZeroSync(comm::Communicator data, ZeroOptions options, std::shared_ptr<nn::Module> model,
           std::function<bool(const std::string&)> takes = {});
  ~ZeroSync() override;

  std::string name() const override;
  // Agrees on the model with the data axis and starts every replica from data
  // rank 0's parameters and buffers.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void on_grad_ready(size_t index, Tensor& grad) override;
  void set_sync(bool sync) override { sync_ = sync; }
  void finish() override;
  void after_step() override;

  std::vector<NamedParameter> optimizer_parameters() const override { return slices_; }
  std::vector<std::pair<int64_t, int64_t>> optimizer_parameter_runs() const override {
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (const OwnedSlice& s : owned_) runs.emplace_back(s.begin, s.end);
    return runs;
  }
  bool splits_optimizer() const override { return true; }
  void attach(optim::Optimizer& optimizer) override;
  bool collective_forward() const override { return o_.stage == 3; }

  nn::NamedTensors model_state(const nn::Module& model) override;
  void load_model_state(nn::Module& model, const nn::NamedTensors& state) override;
  optim::OptimizerState optimizer_state(const optim::Optimizer& optimizer) override;
  void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) override;

  // The two halves of optimizer_state / load_optimizer_state on a state
  // numbered by this sync's slices (one group's part of a shared optimizer):
  // the whole buffers numbered by this sync's parameters (complete on data
  // rank 0; collective), and back to this rank's slices.
  optim::OptimizerState gather_optimizer_state(const optim::OptimizerState& local);
  optim::OptimizerState slice_optimizer_state(const optim::OptimizerState& whole) const;
  const std::vector<NamedParameter>& parameters() const { return params_; }

  const Layout& layout() const { return *layout_; }
  int stage() const { return o_.stage; }

 private:
  enum class Gathered { no, gathering, yes };
  struct Unit {  // one bucket
    Tensor params;    // [padded]: stages 1-2 the parameters live here; stage 3 while gathered
    Tensor grads;     // [padded]: stage 1's gradient bucket; stages 2-3 the reduce-scatter input
    int64_t shard_at = 0;  // stage 2-3: this rank's piece in shard_ / shard_grads_
    size_t ready = 0;      // gradients final, counted for the reduction
    size_t ready_in_backward = 0;  // stage 3: gradients final in the running backward
    bool launched = false;
    comm::Work reduce = comm::Work::completed();
    Gathered gathered = Gathered::yes;
    comm::Work gather = comm::Work::completed();
  };

  void place_parameters();
  Device device() const;  // the parameters' device, where the flat buffers live
  void launch_ready();
  void launch(Unit& u, size_t index);
  void wait_reductions();
  void finish_reduction(Unit& u);
  Tensor my_piece(const Tensor& flat, size_t bucket) const;
  Tensor shard_piece(const Tensor& flat, size_t bucket) const;
  void broadcast_buffers();
  // Stage 3 (zero_stage3.cc).
  void install_layer_calls();
  Tensor run_layer(size_t layer, nn::Module& module, const Tensor& x);
  void start_gather(size_t unit);
  void wait_gathered(size_t unit);
  void release(size_t unit);
  void gather_all();
  void release_all();

  comm::Communicator comm_;
  ZeroOptions o_;
  std::shared_ptr<nn::Module> model_;
  std::vector<NamedParameter> params_, buffers_;
  std::unique_ptr<Layout> layout_;
  std::vector<Unit> units_;
  std::vector<size_t> launch_order_;   // units in the order their reductions start on every rank
  size_t next_launch_ = 0;
  std::deque<size_t> in_flight_;       // stages 2-3: units whose reduce-scatter input is still held
  std::vector<bool> ready_;            // parameter -> gradient final this backward
  std::vector<OwnedSlice> owned_;
  std::vector<NamedParameter> slices_; // the optimizer's parameters (views)
  Tensor shard_, shard_grads_;         // stage 3 parameters; stage 2-3 gradients
  std::vector<int> unit_of_layer_;     // stage 3: Sequential layer -> unit, -1: no parameters
  bool sync_ = true;
  bool set_up_ = false;
};

}  // namespace braid::parallel::zero
