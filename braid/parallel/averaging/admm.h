// Consensus ADMM (Boyd et al. 2011, section 7; `parallel.strategy = admm`,
// docs/aggregation.md). The job minimises sum_i f_i(x) over the workers' data
// as sum_i f_i(x_i) subject to x_i = z. With penalty rho and scaled duals u_i,
// each round of tau local steps is
//
//   x_i <- argmin f_i(x) + rho/2 |x - z + u_i|^2     (inexactly: tau steps of
//                                                    the local optimizer, the
//                                                    gradient plus rho (x - z + u_i))
//   z   <- mean_i (x_i + u_i)
//   u_i <- u_i + x_i - z
//
// The tau steps of a round start from z (`warm_start = z`, the default) or
// from the replica's own x_i where the last round left it (`x`). An exact
// x-update does not depend on where it starts; an inexact one does, and on a
// noisy deep-learning step the replicas left to drift apart between rounds
// average to a worse z (Fashion-MNIST MLP, 4 replicas: 0.5-0.6 points below
// all-reduce from z, 1.5 from x). Both keep the fixed point: at x_i = z the
// local gradient plus rho u_i is zero, so a round started at z stays there.
//
//   synchronous   z by one all-reduce per round
//   asynchronous  z on parameter servers as the mean of every worker's latest
//                 x_i + u_i (each push adds the change of the worker's share);
//                 a worker's pull for round r waits until S of the W workers
//                 have reported round r (the partial barrier) and until the
//                 slowest is within `max_delay` rounds (the bounded delay),
//                 after Zhang & Kwok (2014)
//
// z is the model the job produces: finish() and checkpoints hold it. A resumed
// run restarts from z with u_i = 0 (the duals are not in the checkpoint).
#pragma once

#include <memory>
#include <vector>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/averaging/center_on_servers.h"
#include "braid/parallel/averaging/replica_exchange.h"

namespace braid::parallel::averaging {

struct AdmmOptions {
  double rho = 0.01;       // penalty, > 0
  int64_t tau = 8;         // local steps per round, >= 1
  int64_t barrier = 0;     // asynchronous: S, workers a round waits for; 0 = W
  int64_t max_delay = 2;   // asynchronous: rounds the fastest may lead the slowest
  bool start_from_z = true;  // each round's local steps start from z (else from x_i)
  bool async = false;      // z on parameter servers (make_plan picks the constructor)
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  Duration timeout = std::chrono::seconds(300);
};

class Admm final : public Aggregation {
 public:
  // Synchronous, over the data axis.
  Admm(comm::Communicator data_axis, AdmmOptions options);
  // Asynchronous: z on `servers` parameter servers (the transport's first ranks).
  Admm(std::shared_ptr<comm::Transport> transport, int servers, AdmmOptions options);

  std::string name() const override { return z_on_servers_ ? "admm-async" : "admm"; }
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void combine_gradients() override;  // + rho (x - z + u)
  void after_step() override;
  // Asynchronous: every worker's rounds, tau steps each.
  std::optional<int64_t> job_steps() const override;
  void finish() override;             // every worker takes z
  // z as of this worker's last round in the parameters for an
  // evaluation, and back.
  void begin_evaluation() override;
  void end_evaluation() override;
  nlohmann::json state_dict() const override { return {{"steps", steps_}}; }
  void load_state_dict(const nlohmann::json& state) override;
  nn::NamedTensors model_state(const nn::Module& model) override;  // z
  int replica() const override;
  int replicas() const override;
  nlohmann::json stats() const override;
  std::string report() const override;

  const std::vector<float>& consensus() const { return z_; }
  const std::vector<float>& dual() const { return u_; }
  int64_t rounds() const { return rounds_; }
  // |x_i - z|^2 summed over this worker's entries after the last round (the
  // primal residual's share of this worker).
  double residual() const { return residual_; }

 private:
  void round();

  AdmmOptions o_;
  Exchange world_;
  std::unique_ptr<CenterOnServers> z_on_servers_;
  FlatParams params_;
  EvaluationSwap evaluation_;
  std::vector<NamedParameter> buffers_;  // floating ones, averaged at the end (synchronous only)
  Tensor flat_, grads_;                  // [n] staging
  std::vector<float> z_, u_, share_, change_;
  int64_t steps_ = 0, steps_here_ = 0, rounds_ = 0;
  double residual_ = 0;
  bool ready_ = false, finished_ = false;
};

}  // namespace braid::parallel::averaging
