// Local SGD / periodic model averaging and BMUF (`parallel.strategy =
// local_sgd | bmuf`, docs/aggregation.md): replicas step their local
// optimizers on their own data and combine their parameters every H steps.
//
//   warm-up    the first `warmup` steps are synchronous SGD: the gradients
//              are averaged before the optimizer (post-local SGD, Lin et al.
//              2020), so replicas stay equal while the model moves fastest
//   averaging  after step k (counted from 0 over every step, as PyTorch's
//              PeriodicModelAverager counts) with k >= warmup and
//              (k - warmup) % H == 0, the replicas' parameters and buffers are
//              replaced by their mean over the data axis
//   hierarchy  with host_period h > 0, the same inside each host every h
//              steps (cheap shared memory) and across hosts every H steps
//
// BMUF (Chen & Huo, 2016) treats each averaging as a block: with W_g the
// global model after the last block and W_init the point this block started
// from,
//   G     = mean_i(x_i) - W_init              the block's aggregated update
//   Delta = eta Delta + zeta G                block momentum eta, block lr zeta
//   W_g   = W_g + Delta
//   W_init (next block) = W_g                 classical block momentum
//                       = W_g + eta Delta     Nesterov
// and every replica restarts from W_init. eta = 0, zeta = 1 is plain averaging.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/averaging/replica_exchange.h"

namespace braid::parallel::averaging {

struct ModelAveragingOptions {
  int64_t period = 8;       // H >= 1
  int64_t warmup = 0;       // steps of synchronous SGD first
  int64_t host_period = 0;  // h: averaging inside each host; 0 = none; H must be a multiple of it
  bool bmuf = false;        // the block update above instead of plain averaging
  double block_momentum = 0.0;  // eta in [0, 1)
  double block_lr = 1.0;        // zeta > 0
  bool nesterov = false;
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  Duration timeout = std::chrono::seconds(300);
};

class ModelAveraging final : public Aggregation {
 public:
  ModelAveraging(comm::Communicator data_axis, ModelAveragingOptions options);

  std::string name() const override { return o_.bmuf ? "bmuf" : "local_sgd"; }
  // Checks that the replicas agree, starts them from data rank 0's model.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void combine_gradients() override;  // warm-up: the gradients' mean
  void after_step() override;
  // A last averaging (BMUF: the global model W_g), so the evaluated and saved
  // model is one model on every rank.
  void finish() override;
  nlohmann::json state_dict() const override { return {{"steps", steps_}}; }
  void load_state_dict(const nlohmann::json& state) override;
  // The replicas' mean (collective; the live replicas are left as they are).
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override { return world_.rank(); }
  int replicas() const override { return world_.size(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  int64_t steps() const { return steps_; }
  int64_t averagings() const { return global_; }
  int64_t host_averagings() const { return local_; }

 private:
  bool in_warmup() const { return steps_ < o_.warmup; }
  void average_globally();
  void average_in_host();

  ModelAveragingOptions o_;
  Exchange world_, host_;
  FlatParams params_;
  std::vector<NamedParameter> buffers_;  // floating ones, averaged with the parameters
  Tensor flat_, grads_;                  // [n] staging
  std::vector<float> global_model_, delta_, start_;  // BMUF: W_g, Delta, W_init
  int64_t steps_ = 0, last_average_ = 0;
  int64_t global_ = 0, local_ = 0, steps_here_ = 0;
  bool ready_ = false;
};

}  // namespace braid::parallel::averaging
